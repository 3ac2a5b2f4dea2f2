"""The policies and their scoring (usage/evaluate.py) by hand, the best plan in hindsight
against every plan within the rules on small random cases, and the suggestions scored on the
real openb trace (replayed through convert_trace and import_usage, walked month by month)
against the equal split, the seed's rule and the best plan in hindsight."""

import itertools
import random
from datetime import date, timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from quotas.models import Cluster
from tests.support.usage import JUNE_PERIOD as JUNE
from tests.support.usage import days
from usage.evaluate import (
    EQUAL_SPLIT,
    HINDSIGHT,
    POLICIES,
    SEED_RULE,
    SUGGESTED,
    Plan,
    fit_to_capacity,
    plan_equal_split,
    plan_hindsight,
    plan_seed_rule,
    score_plan,
)
from usage.forecast import Distribution, Prices, demand_day
from usage.management.commands.evaluate_suggestions import run_evaluation, whole_months
from usage.models import SuggestionBacktest, UsageSample
from usage.suggest import AllocationUsage, guarantee_step

D = Decimal
PRICES = Prices()


def dist(*values: float, hours: float = 1.0) -> Distribution:
    return Distribution((v, hours) for v in values)


def test_scoring_by_hand():
    # Demand 0, 1 and 4 for an hour each under guarantee 2 and cap 3.
    score = score_plan({"a": Plan(D(2), D(3))}, {"a": dist(0, 1, 4)}, prices=PRICES)
    assert score.demand == 5
    assert score.covered == 0 + 1 + 2
    assert score.borrowed == 1  # 4: one above the guarantee within the cap...
    assert score.blocked == 1  # ...and one above the cap
    assert score.idle == 2 + 1 + 0 and score.guaranteed == 6
    assert score.idle_share == 0.5 and score.covered_share == 0.6 and score.blocked_share == 0.2
    # Idle at 1, borrowed at 0.5 (training), blocked at 4.
    assert score.cost == 3 * 1 + 1 * 0.5 + 1 * 4
    inference = score_plan(
        {"a": Plan(D(2), D(3))}, {"a": dist(0, 1, 4)}, prices=PRICES, classes={"a": "inference"}
    )
    assert inference.cost == 3 * 1 + 1 * 2 + 1 * 4
    # A namespace without a plan has neither guarantee nor cap: all its demand is blocked.
    assert score_plan({}, {"b": dist(2, 2)}, prices=PRICES).blocked == 4


def _item(name: str, peaks: list[int]) -> AllocationUsage:
    demand = [
        demand_day(JUNE.start + timedelta(i), 1.0, [peak, peak / 2]) for i, peak in enumerate(peaks)
    ]
    return AllocationUsage(
        name,
        "nvidia.com/gpu",
        "training",
        "gpu",
        D(0),
        D(0),
        days(JUNE, n=0),
        demand=demand,
    )


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


def test_the_seed_rule_reads_the_daily_peaks_of_demand_and_scales_to_fit():
    # The 5-minute demand's daily peaks (p95 of 10 days: 9.55 of 1..10); 80% -> 7.64 -> 8.
    items = [_item("a", list(range(1, 11))), _item("b", [6] * 10)]
    # b: 80% of 6 = 4.8 -> 5. 8 + 5 = 13 > 10: scaled by 10/13, largest remainder.
    plans = plan_seed_rule(items, capacity=D(10), max_cap_share=D(1))
    assert plans == {"a": Plan(D(6), D(10)), "b": Plan(D(4), D(6))}
    # A namespace without data keeps its values, as the method keeps them.
    kept = AllocationUsage("c", "nvidia.com/gpu", "dev", "gpu", D(2), D(4), [])
    assert plan_seed_rule([kept], capacity=D(10), max_cap_share=D(1)) == {"c": Plan(D(2), D(4))}


def test_fit_to_capacity_and_the_step():
    assert fit_to_capacity({"a": D(8), "b": D(5)}, capacity=D(10), whole=True) == {
        "a": D(6),
        "b": D(4),
    }
    assert fit_to_capacity({"a": D(1)}, capacity=D(10), whole=True) == {"a": D(1)}
    assert guarantee_step(D(16), whole=True) == 1
    assert guarantee_step(D(640_000), whole=True) == 100  # MiB of vGPU memory
    assert guarantee_step(D("3.5"), whole=False) == D("0.001")


def test_hindsight_gives_the_next_unit_where_it_saves_most():
    # Steady: 4 all the time. Bursty: 8 a quarter of the time, else 0. A guaranteed unit of the
    # bursty one would sit idle three quarters of the time (1 x 3/4) to save a quarter's
    # borrowing (0.5 x 1/4): the best plan guarantees the steady namespace only.
    demand = {"steady": dist(4, 4, 4, 4), "bursty": dist(8, 0, 0, 0)}
    plans = plan_hindsight(demand, capacity=D(6), max_cap_share=D(1), prices=PRICES)
    assert plans == {"steady": Plan(D(4), D(4)), "bursty": Plan(D(0), D(6))}
    # The cap is the highest demand within the share: 50% of 6 holds both at 3.
    plans = plan_hindsight(demand, capacity=D(6), max_cap_share=D("0.5"), prices=PRICES)
    assert plans == {"steady": Plan(D(3), D(3)), "bursty": Plan(D(0), D(3))}
    # Borrowing dear enough (inference at 4), the bursty one gets what capacity is left.
    dear = Prices(inference_borrowed=D(4))
    plans = plan_hindsight(
        demand, capacity=D(6), max_cap_share=D(1), prices=dear, classes={"bursty": "inference"}
    )
    assert plans == {"steady": Plan(D(4), D(4)), "bursty": Plan(D(2), D(6))}


def test_no_plan_within_the_rules_costs_less_than_hindsight():
    rng = random.Random(7)
    for _ in range(40):
        capacity = D(rng.randint(1, 6))
        share = rng.choice([D("0.5"), D("0.75"), D(1)])
        demand = {
            name: dist(*(rng.choice([0, 0, 1, 2, 3, 5]) + rng.choice([0, 0.5]) for _ in range(9)))
            for name in ("a", "b", "c")
        }
        classes = {name: rng.choice(["training", "inference", "dev"]) for name in demand}
        best = plan_hindsight(
            demand, capacity=capacity, max_cap_share=share, prices=PRICES, classes=classes
        )
        max_cap = int(capacity * share)
        assert sum(p.guarantee for p in best.values()) <= capacity
        assert all(p.guarantee <= p.cap <= max_cap for p in best.values())
        found = score_plan(best, demand, prices=PRICES, classes=classes).cost
        for caps in itertools.product(range(max_cap + 1), repeat=3):
            for gs in itertools.product(*(range(c + 1) for c in caps)):
                if sum(gs) > capacity:
                    continue
                plans = {n: Plan(D(g), D(c)) for n, g, c in zip("abc", gs, caps, strict=True)}
                other = score_plan(plans, demand, prices=PRICES, classes=classes).cost
                assert found <= other + 1e-9, (demand, capacity, share, best, plans)


def test_the_whole_months_of_a_span():
    assert whole_months(date(2025, 1, 1), 149) == [date(2025, m, 1) for m in (1, 2, 3, 4)]
    assert whole_months(date(2025, 1, 15), 60) == [date(2025, 2, 1)]
    assert whole_months(date(2025, 1, 1), 30) == []


@pytest.mark.django_db
def test_on_the_openb_trace_month_by_month_the_suggestions_beat_both_baselines():
    result = run_evaluation()
    # The trace's 149 days hold January to April whole: February, March and April scored.
    assert result.walk == "months" and result.namespaces == 6
    assert [(start, end) for start, end, _ in result.periods] == [
        (date(2025, 2, 1), date(2025, 2, 28)),
        (date(2025, 3, 1), date(2025, 3, 31)),
        (date(2025, 4, 1), date(2025, 4, 30)),
    ]
    assert result.samples == (28 + 31 + 30) * 288 * 6
    totals = result.totals
    suggested, equal, seed = totals[SUGGESTED], totals[EQUAL_SPLIT], totals[SEED_RULE]
    assert suggested.demand == seed.demand == equal.demand > 10_000
    # The number the method minimises: idle, borrowed and blocked unit-hours priced.
    assert suggested.cost < seed.cost and suggested.cost < equal.cost
    # Hindsight, under the same rules and by the same code, bounds every policy each month.
    for _, _, scores in result.periods:
        assert all(scores[HINDSIGHT].cost <= scores[p].cost + 1e-6 for p in POLICIES)
        assert scores[HINDSIGHT].blocked == 0
    assert totals[HINDSIGHT].cost < suggested.cost
    # The replay ran in a transaction that was rolled back.
    assert not Cluster.objects.filter(name="openb-eval").exists()
    assert not UsageSample.objects.exists() and not SuggestionBacktest.objects.exists()


@pytest.mark.django_db
def test_the_command_prints_the_tables_and_refuses_a_window_past_the_trace():
    out = StringIO()
    call_command(
        "evaluate_suggestions", "--walk", "folds", "--folds", "1", "--from-day", "120", stdout=out
    )
    text = out.getvalue()
    assert "1 folds of 21 days suggested from, 7 days scored" in text
    assert "| policy | demand (GPU-hours) | covered by guarantee |" in text
    assert "| suggested |" in text and "| seed rule |" in text and "| equal split |" in text
    assert "| best in hindsight |" in text and "all folds" in text
    with pytest.raises(CommandError, match="ends after the last whole day of the trace"):
        call_command(
            "evaluate_suggestions", "--walk", "folds", "--from-day", "140", stdout=StringIO()
        )
    with pytest.raises(CommandError, match="--from-day: must be at least 0"):
        call_command("evaluate_suggestions", "--from-day", "-1", stdout=StringIO())
