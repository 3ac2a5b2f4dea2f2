"""The month of 5-minute demand the suggestions read (usage.selectors.demand_history_for): the
daily rollups' demand counts in one query (the samples of rollups from before the counts were
kept in one more), one source a day as the rollups choose it, days in the portal's time zone,
each sample weighed by its day's interval, still there once the samples are pruned; and
suggestions_compute reading it."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

from usage.models import Suggestion, UsageDaily, UsageSample
from usage.rollup import usage_prune, usage_rollup
from usage.selectors import demand_history_for
from usage.suggestions import suggestions_compute

D = Decimal
JUNE = date(2025, 6, 1)
JUNE_END = date(2025, 6, 30)


def _rolled_up():
    usage_rollup(start=JUNE, end=date(2025, 7, 1))


def _samples(ns, resource, start, n, demand, *, pending=0, source="cluster", every=5):
    UsageSample.objects.bulk_create(
        UsageSample(
            team_namespace=ns,
            resource=resource,
            timestamp=start + timedelta(minutes=every * i),
            allocated=D(demand(i) if callable(demand) else demand),
            pending=D(pending),
            source=source,
        )
        for i in range(n)
    )


@pytest.mark.django_db
def test_a_day_counts_each_demand_once_and_adds_what_waited(ns_a, gpu, cluster):
    day = datetime(2025, 6, 3, tzinfo=UTC)
    # 288 samples: 2 running for the first 100, then 2 running + 1 pending.
    _samples(ns_a, gpu, day, 100, 2)
    _samples(ns_a, gpu, day + timedelta(minutes=500), 188, 2, pending=1)
    _rolled_up()
    with CaptureQueriesContext(connection) as queries:
        history = demand_history_for(cluster=cluster, start=JUNE, end=JUNE_END)
    assert len(queries) == 1
    (only,) = history[(ns_a.pk, gpu.pk)]
    assert only.day == date(2025, 6, 3)
    assert only.counts == ((2.0, 100), (3.0, 188))
    assert only.sample_hours == pytest.approx(24 / 288)


@pytest.mark.django_db
def test_one_source_a_day_the_one_with_most_samples(ns_a, gpu, cluster):
    day = datetime(2025, 6, 4, tzinfo=UTC)
    _samples(ns_a, gpu, day, 288, 4, source="cluster")
    _samples(ns_a, gpu, day, 24, 9, source="prometheus", every=60)
    # The next day Prometheus has more samples than the collector.
    _samples(ns_a, gpu, day + timedelta(days=1), 24, 1, source="cluster", every=60)
    _samples(ns_a, gpu, day + timedelta(days=1), 96, 7, source="prometheus", every=15)
    _rolled_up()
    history = demand_history_for(cluster=cluster, start=JUNE, end=JUNE_END)
    first, second = history[(ns_a.pk, gpu.pk)]
    assert first.counts == ((4.0, 288),) and first.sample_hours == pytest.approx(5 / 60)
    # Sampled every 15 minutes: each sample a quarter hour; each day weighs one day.
    assert second.counts == ((7.0, 96),) and second.sample_hours == pytest.approx(0.25)


@pytest.mark.django_db
def test_days_are_the_portals_and_the_range_is_inclusive(ns_a, gpu, cluster):
    # 23:30 UTC on 30 June is 1 July in Shanghai (UTC+8).
    late = datetime(2025, 6, 30, 23, 30, tzinfo=UTC)
    _samples(ns_a, gpu, late, 3, 5)
    _rolled_up()
    assert [
        d.day
        for d in demand_history_for(cluster=cluster, start=JUNE, end=JUNE_END)[(ns_a.pk, gpu.pk)]
    ] == [date(2025, 6, 30)]
    UsageDaily.objects.all().delete()
    with override_settings(TIME_ZONE="Asia/Shanghai"):
        _rolled_up()
        in_june = demand_history_for(cluster=cluster, start=JUNE, end=JUNE_END)
        in_july = demand_history_for(cluster=cluster, start=date(2025, 7, 1), end=date(2025, 7, 1))
    assert in_june == {}
    assert [d.day for d in in_july[(ns_a.pk, gpu.pk)]] == [date(2025, 7, 1)]


@pytest.mark.django_db
def test_only_the_pairs_asked_for_and_the_clusters_own(ns_a, ns_b, gpu, cluster):
    day = datetime(2025, 6, 5, tzinfo=UTC)
    _samples(ns_a, gpu, day, 10, 1)
    _samples(ns_b, gpu, day, 10, 2)
    _rolled_up()
    both = demand_history_for(cluster=cluster, start=JUNE, end=JUNE_END)
    assert set(both) == {(ns_a.pk, gpu.pk), (ns_b.pk, gpu.pk)}
    one = demand_history_for(cluster=cluster, start=JUNE, end=JUNE_END, pairs={(ns_b.pk, gpu.pk)})
    assert set(one) == {(ns_b.pk, gpu.pk)}


@pytest.mark.django_db
def test_the_monthly_suggestions_read_each_days_distribution_not_only_its_peak(
    ns_a, alloc_a, gpu, cluster
):
    # Busy at 6 GPUs two hours a day, idle otherwise: the day's peak and mean do not show how
    # short the bursts are; its demand counts do. The samples are gone by then.
    for i in range(30):
        start = datetime(2025, 6, 1, tzinfo=UTC) + timedelta(days=i)
        _samples(ns_a, gpu, start, 288, lambda k: 6 if 100 <= k < 124 else 0)
    _rolled_up()
    assert usage_prune(now=datetime(2027, 1, 1, tzinfo=UTC)) == 30 * 288
    assert suggestions_compute(cluster=cluster, month=JUNE, today=date(2025, 7, 1)) >= 1
    s = Suggestion.objects.get(team_namespace=ns_a, resource=gpu)
    # A guaranteed GPU would idle 22 hours a day: training borrows its bursts.
    assert s.suggested_guarantee == 0
    assert s.suggested_cap == 8  # 6 x 1.25 = 7.5 -> 8, within 50% of 16
    assert s.figures["busy_days"] == 30
    assert s.figures["forecast_peak"] == "6"


@pytest.mark.django_db
def test_rollups_from_before_the_counts_read_those_days_samples(ns_a, ns_b, gpu, cluster):
    day = datetime(2025, 6, 3, tzinfo=UTC)
    _samples(ns_a, gpu, day, 288, lambda k: k % 4)
    _samples(ns_a, gpu, day + timedelta(days=1), 24, 3, source="prometheus", every=60)
    _samples(ns_a, gpu, day + timedelta(days=1), 12, 8, source="csv", every=120)
    _samples(ns_b, gpu, day, 288, 1, pending=2)
    _rolled_up()
    kept = demand_history_for(cluster=cluster, start=JUNE, end=JUNE_END)
    # As a rollup of an older version left them: no counts on ns_a's days.
    assert UsageDaily.objects.filter(team_namespace=ns_a).update(demand_counts=None) == 2
    with CaptureQueriesContext(connection) as queries:
        read = demand_history_for(cluster=cluster, start=JUNE, end=JUNE_END)
    assert len(queries) == 2
    assert read == kept
    assert [d.counts for d in read[(ns_a.pk, gpu.pk)]] == [
        ((0.0, 72), (1.0, 72), (2.0, 72), (3.0, 72)),
        ((3.0, 24),),
    ]
