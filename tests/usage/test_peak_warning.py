"""The "guarantee below 80% of last month's typical daily peak" warning, fed by the rollups."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from approvals.models import RequestLine
from approvals.validation import validate_lines
from quotas.rules import RULE_GUARANTEE_BELOW_PEAK
from usage.models import UsageDaily


def rollup(ns, gpu, day, peak):
    UsageDaily.objects.create(
        team_namespace=ns,
        resource=gpu,
        day=day,
        source="cluster",
        samples=288,
        peak=peak,
        p95=peak,
        mean=peak,
        gpu_hours=peak * 24,
        borrowed_gpu_hours=0,
        idle_guaranteed_gpu_hours=0,
    )


def line(ns, gpu, guarantee, cap):
    return RequestLine(
        team_namespace=ns,
        resource=gpu,
        requested_guarantee=Decimal(guarantee),
        requested_cap=Decimal(cap),
    )


@pytest.mark.django_db
def test_a_guarantee_below_the_typical_peak_warns(alloc_a, gpu):
    ns = alloc_a.team_namespace
    today = timezone.localdate()
    for back in range(1, 31):
        rollup(ns, gpu, today - timedelta(days=back), Decimal(10))
    rollup(ns, gpu, today - timedelta(days=45), Decimal(100))  # older than a month: ignored
    [warning] = [
        f
        for f in validate_lines([line(ns, gpu, 6, 10)], final=False)
        if f.rule == RULE_GUARANTEE_BELOW_PEAK
    ]
    assert warning.level == "warning" and warning.namespace == "team-a-training"
    assert "10" in warning.message
    # 8 is 80% of the typical peak: no warning.
    assert not [
        f
        for f in validate_lines([line(ns, gpu, 8, 10)], final=False)
        if f.rule == RULE_GUARANTEE_BELOW_PEAK
    ]


@pytest.mark.django_db
def test_no_usage_no_warning(alloc_a, gpu):
    findings = validate_lines([line(alloc_a.team_namespace, gpu, 1, 10)], final=False)
    assert RULE_GUARANTEE_BELOW_PEAK not in {f.rule for f in findings}
