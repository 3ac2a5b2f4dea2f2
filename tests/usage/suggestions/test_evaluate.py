"""The suggestions scored on the real openb trace (replayed through convert_trace and
import_usage) against the equal split, the seed's rule and the best plan in hindsight; and the
scoring and the hindsight optimum by hand."""

import itertools
import random
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from quotas.models import Cluster
from tests.support.usage import JUNE_PERIOD as JUNE
from tests.support.usage import days
from usage.evaluate import (
    Plan,
    plan_equal_split,
    plan_hindsight,
    plan_seed_rule,
    score_plan,
    unit_gains,
)
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


def test_a_units_gain_is_twice_what_it_covers_less_one_per_sample():
    # Demand 0, 1, 2.5, 4: the first unit covers 3 samples (gain 2*3 - 4 = 2), the second 2
    # (0), the third 1.5 (-1), the fourth 1 (-2).
    assert unit_gains([D(0), D(1), D("2.5"), D(4)], 4) == [2, 0, -1, -2]


def test_hindsight_gives_the_next_unit_where_it_covers_most():
    # Steady: 4 all the time. Bursty: 8 a quarter of the time, else 0. A proportional cut of
    # (4, 8) to 6 units gives 2 and 4; every unit on the bursty one is idle three quarters of
    # the time, so the best plan guarantees the steady namespace and lets the bursty borrow.
    demand = {"steady": [D(4)] * 8, "bursty": [D(8), D(0), D(0), D(0)] * 2}
    plans = plan_hindsight(demand, capacity=D(6), max_cap_share=D(1))
    assert plans == {"steady": Plan(D(4), D(4)), "bursty": Plan(D(0), D(6))}
    # The cap is the highest demand within the share: 50% of 6 holds both at 3.
    plans = plan_hindsight(demand, capacity=D(6), max_cap_share=D("0.5"))
    assert plans == {"steady": Plan(D(3), D(3)), "bursty": Plan(D(0), D(3))}


def test_no_plan_within_the_rules_beats_hindsight():
    rng = random.Random(7)
    for _ in range(40):
        capacity = D(rng.randint(1, 6))
        share = rng.choice([D("0.5"), D("0.75"), D(1)])
        demand = {
            name: [D(rng.choice([0, 0, 1, 2, 3, 5])) + D(rng.choice([0, "0.5"])) for _ in range(9)]
            for name in ("a", "b", "c")
        }
        best = plan_hindsight(demand, capacity=capacity, max_cap_share=share)
        max_cap = int(capacity * share)
        assert sum(p.guarantee for p in best.values()) <= capacity
        assert all(p.guarantee <= p.cap <= max_cap for p in best.values())
        found = score_plan(best, demand, hours_per_sample=D(1)).mismatch
        for caps in itertools.product(range(max_cap + 1), repeat=3):
            for gs in itertools.product(*(range(c + 1) for c in caps)):
                if sum(gs) > capacity:
                    continue
                plans = {n: Plan(D(g), D(c)) for n, g, c in zip("abc", gs, caps, strict=True)}
                other = score_plan(plans, demand, hours_per_sample=D(1)).mismatch
                assert found <= other, (demand, capacity, share, best, plans)


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
    # Hindsight, under the same rules, is at least as good as every method: it bounds them.
    hindsight = result.totals["best in hindsight"]
    assert hindsight.demand == suggested.demand
    assert all(hindsight.mismatch <= result.totals[p].mismatch for p in result.totals)
    assert hindsight.mismatch < suggested.mismatch
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
    assert "| best in hindsight |" in text
    with pytest.raises(CommandError, match="ends after the last whole day of the trace"):
        call_command("evaluate_suggestions", "--from-day", "140", stdout=StringIO())
