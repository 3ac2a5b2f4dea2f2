"""The suggestions scored on the real openb trace (replayed through convert_trace and
import_usage) against the equal split and the seed's rule; and the scoring by hand."""

from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from quotas.models import Cluster
from tests.support.usage import JUNE_PERIOD as JUNE
from tests.support.usage import days
from usage.evaluate import Plan, plan_equal_split, plan_seed_rule, score_plan
from usage.management.commands.evaluate_suggestions import run_evaluation
from usage.models import UsageSample
from usage.suggest import AllocationUsage

D = Decimal


def test_scoring_by_hand():
    plans = {"a": Plan(D(2), D(3))}
    score = score_plan({**plans}, {"a": [D(0), D(1), D(4)]}, hours_per_sample=D(1))
    assert score.demand == 5
    assert score.covered == 0 + 1 + 2
    assert score.idle == 2 + 1 + 0
    assert score.cut_off == 1  # 4 above the cap of 3
    assert score.mismatch == score.uncovered + score.idle + score.cut_off == 2 + 3 + 1


def test_the_baselines_by_hand():
    items = [
        AllocationUsage("a", "nvidia.com/gpu", "training", "gpu", D(0), D(0), days(JUNE, peak=10)),
        AllocationUsage("b", "nvidia.com/gpu", "training", "gpu", D(0), D(0), days(JUNE, peak=3)),
    ]
    assert plan_equal_split(items, capacity=D(16), max_cap_share=D("0.5")) == {
        "a": Plan(D(8), D(8)),
        "b": Plan(D(8), D(8)),
    }
    # 80% of 10 = 8 and of 3 = 2.4 -> 3; caps the peaks, a's bounded by 50% of 16
    assert plan_seed_rule(items, capacity=D(16), max_cap_share=D("0.5")) == {
        "a": Plan(D(8), D(8)),
        "b": Plan(D(3), D(3)),
    }


@pytest.mark.django_db
def test_on_the_openb_trace_the_suggestions_beat_both_baselines():
    result = run_evaluation()
    equal, seed, suggested = (result.totals[p] for p in ("equal split", "seed rule", "suggested"))
    assert result.namespaces == 6 and result.samples == 3 * 7 * 288 * 6
    assert suggested.demand == seed.demand == equal.demand > 1000
    # The metric that matters: demand not covered + guarantee idle + demand cut off.
    assert suggested.mismatch < seed.mismatch
    assert suggested.mismatch < equal.mismatch
    # Nothing covered is given up for it, and less is cut off by the cap.
    assert suggested.covered >= seed.covered
    assert suggested.cut_off < seed.cut_off
    # The replay ran in a transaction that was rolled back.
    assert not Cluster.objects.filter(name="openb-eval").exists()
    assert not UsageSample.objects.exists()


@pytest.mark.django_db
def test_the_command_prints_the_table_and_refuses_a_window_past_the_trace():
    out = StringIO()
    call_command("evaluate_suggestions", "--folds", "1", "--from-day", "120", stdout=out)
    text = out.getvalue()
    assert "| policy | demand | covered by guarantee |" in text
    assert "| suggested |" in text and "| seed rule |" in text and "| equal split |" in text
    with pytest.raises(CommandError, match="ends after the last whole day of the trace"):
        call_command("evaluate_suggestions", "--from-day", "140", stdout=StringIO())
