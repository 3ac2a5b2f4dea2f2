"""Suggestion maths on synthetic months with known answers: a flat namespace, a bursty one, a
growing one, one that stops using its guarantee, a new one without history; guarantees chosen
together where capacity is short; the seed's floor as a priced warning; thin data, no data, a
month not over; and a property test that no suggestion ever breaks a rule of the plan."""

import random
from datetime import date, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quotas.rules import ERROR, AllocationFacts, ClusterFacts, UsageFacts, check_plan
from tests.support.usage import JUNE_PERIOD as JUNE
from tests.support.usage import days
from usage import selectors
from usage.forecast import Prices, demand_day
from usage.suggest import (
    FLAG_BELOW_FLOOR,
    FLAG_GROWING,
    FLAG_IDLE,
    FLAG_LOW_UTILIZATION,
    FLAG_NO_DATA,
    FLAG_NOT_OVER,
    FLAG_SCALED,
    FLAG_SHARE,
    FLAG_THIN,
    TYPICAL_PEAK_PERCENTILE,
    AllocationUsage,
    Period,
    suggest_allocation,
    suggest_cluster,
)

D = Decimal
SHARE = D("0.5")
GPU = "nvidia.com/gpu"
FIVE_MINUTES = 5 / 60


def month(fn, *, n=30, start=JUNE.start):
    """``n`` days of 5-minute demand, ``fn(day index, sample index of 288)``."""
    return [
        demand_day(start + timedelta(i), FIVE_MINUTES, [fn(i, k) for k in range(288)])
        for i in range(n)
    ]


def usage(demand, *, ns="team-a", wc="training", g=0, c=0, kind="gpu", rollups=()):
    return AllocationUsage(
        namespace=ns,
        resource=GPU,
        workload_class=wc,
        resource_kind=kind,
        current_guarantee=D(g),
        current_cap=D(c),
        days=list(rollups),
        unit="GPU",
        demand=demand,
    )


SIXTEEN = D(16)
DEFAULT_PRICES = Prices()


def alone(item, *, capacity=SIXTEEN, prices=DEFAULT_PRICES, period=JUNE):
    return suggest_allocation(
        item, period=period, capacity=capacity, max_cap_share=SHARE, prices=prices
    )


def notes(p) -> str:
    return " | ".join(str(n) for n in p.notes)


# The five namespaces the issue names.
FLAT = month(lambda i, k: 4)
# Busy 2 h on every tenth day at 8 GPUs, one GPU otherwise.
BURSTY = month(lambda i, k: 8 if i % 10 == 3 and 100 <= k < 124 else 1)
_noise = random.Random(3)
GROWING = month(lambda i, k: 2 + i // 3 + (_noise.random() < 0.3))
STOPPED = month(lambda i, k: 5 if i < 18 else 0)


def test_a_flat_namespace_is_guaranteed_what_it_uses_and_told_of_its_idle_gpus():
    p = alone(usage(FLAT, wc="inference", g=6, c=10))
    # Every sample 4: a fifth GPU would idle all month, a fourth covers all month.
    assert (p.guarantee, p.cap) == (4, 5)  # cap 4 x 1.25 -> 5
    assert p.confidence == "high" and FLAG_IDLE in p.flags
    assert "busy 30 of 30 days; at 4 guaranteed GPU, 100% of last month's demand" in notes(p)
    assert "2 of 6 guaranteed GPU never used this month" in notes(p)
    assert "1440 idle guaranteed GPU-hours" in notes(p)  # 2 GPUs x 24 h x 30 days
    assert p.figures["expected_idle_share"] == "0" and p.figures["expected_covered_share"] == "100"


def test_a_bursty_training_namespace_is_guaranteed_its_base_not_its_bursts():
    p = alone(usage(BURSTY, g=6, c=8))
    # Above 1 GPU demand is there 2 h of each tenth day: a second guaranteed GPU would idle
    # 98% of the time, so it borrows its bursts (cap 8 x 1.25 = 10, held to 8 by the share).
    assert (p.guarantee, p.cap) == (1, 8)
    assert FLAG_SHARE in p.flags
    # The seed's 80% of the typical daily peak is a warning, priced.
    assert FLAG_BELOW_FLOOR in p.flags
    assert "the seed's floor of 7 would add" in notes(p)
    assert "idle guaranteed GPU-hours next month" in notes(p)


def test_inference_pays_more_to_borrow_and_is_guaranteed_more_of_the_same_demand():
    # Demand 2 half of the time and 4 the other half.
    half = month(lambda i, k: 4 if k % 2 else 2)
    training = alone(usage(half, wc="training"))
    inference = alone(usage(half, wc="inference"))
    # Units 3 and 4 are used half the time: worth it when borrowing costs more than idling.
    assert training.guarantee == 2 and inference.guarantee == 4
    # A cluster's own prices move it.
    cheap_idle = alone(usage(half, wc="training"), prices=Prices(idle=D("0.25")))
    assert cheap_idle.guarantee == 4


def test_a_growing_namespace_gets_the_trend_and_a_cap_that_holds_next_month():
    p = alone(usage(GROWING, wc="inference"), capacity=D(64))
    assert FLAG_GROWING in p.flags and p.figures["trend_applied"] is True
    assert "trend +" in notes(p) and "over four weeks" in notes(p)
    # Demand grows a GPU every three days: next month reaches about 2 + 59/3 + 1 ~ 22.7.
    next_month = month(lambda i, k: 2 + (30 + i) // 3 + 1, start=date(2025, 7, 1), n=31)
    top = max(d.peak for d in next_month)
    assert p.cap >= top, (p.cap, top)
    # The guarantee follows the forecast, above anything last month saw.
    assert p.guarantee > max(d.peak for d in GROWING)


def test_a_namespace_that_stops_using_its_guarantee_releases_it_and_keeps_its_cap():
    p = alone(usage(STOPPED, g=4, c=6))
    assert (p.guarantee, p.cap) == (0, 6)
    assert "nothing forecast for next month" in notes(p)
    assert "busy 18 of 30 days; with no guarantee" in notes(p)


def test_a_new_namespace_without_history_keeps_what_it_has():
    p = alone(usage([], g=2, c=4))
    assert (p.guarantee, p.cap, p.confidence) == (2, 4, "none")
    assert FLAG_NO_DATA in p.flags and not p.changes


def test_when_capacity_is_short_the_next_gpu_goes_where_it_covers_most():
    # Three namespaces each want 6, steady; one is busy all the time, two half of the time.
    steady = month(lambda i, k: 6)
    half = month(lambda i, k: 6 if k < 144 else 0)
    items = [
        usage(steady, ns="always"),
        usage(half, ns="mornings"),
        usage(half, ns="evenings", wc="inference"),
    ]
    out = suggest_cluster(
        items, period=JUNE, capacities={GPU: D(10)}, max_cap_share=D(1), cluster="demo"
    )
    got = {p.namespace: p.guarantee for p in out}
    # Idle 1, borrowed 0.5 (training) or 2 (inference): a unit of "always" saves 0.5 an hour,
    # of "evenings" 2 x 0.5 - 0.5 = 0.5, of "mornings" 0.5 x 0.5 - 0.5 < 0 (never worth it).
    assert got == {"always": 6, "evenings": 4, "mornings": 0}
    assert sum(got.values()) == 10
    evenings = next(p for p in out if p.namespace == "evenings")
    assert FLAG_SCALED in evenings.flags and "held to 4 by capacity on demo" in notes(evenings)
    assert FLAG_SCALED not in next(p for p in out if p.namespace == "always").flags


def test_allocations_without_data_keep_their_guarantee_before_the_others_are_chosen():
    out = suggest_cluster(
        [usage([], ns="quiet", g=7, c=8), usage(FLAT, ns="flat", wc="inference")],
        period=JUNE,
        capacities={GPU: D(10)},
        max_cap_share=D(1),
    )
    assert [(p.namespace, p.guarantee) for p in out] == [("quiet", 7), ("flat", 3)]


def test_thin_data_lowers_nothing_but_the_rules_still_apply():
    p = alone(usage(month(lambda i, k: 2, n=5), g=6, c=10))
    assert p.guarantee == 6  # 2 would be cheapest, not lowered on 5 days of data
    assert p.cap == 8  # the current 10 is above 50% of 16
    assert p.confidence == "low" and FLAG_THIN in p.flags
    assert "not lowered on 5 days of data" in notes(p)


def test_a_month_not_over_says_so():
    running = Period(start=JUNE.start, end=JUNE.end, today=date(2025, 6, 25))
    p = alone(usage(month(lambda i, k: 2, n=24)), period=running)
    assert p.confidence == "medium" and FLAG_NOT_OVER in p.flags
    assert "the month is not over" in notes(p)


def test_without_samples_the_daily_rollups_stand_in():
    p = alone(usage((), rollups=days(JUNE, peak=4, utilization=D(12)), g=2, c=4))
    assert (p.guarantee, p.cap) == (4, 5)
    assert FLAG_LOW_UTILIZATION in p.flags and p.figures["utilization_mean"] == "12"


def test_cpu_amounts_are_chosen_in_steps_not_whole_units():
    cpu = month(lambda i, k: 2.5)
    p = suggest_allocation(usage(cpu, kind="cpu"), period=JUNE, capacity=D(64), max_cap_share=SHARE)
    # Steps of 0.01 core (the power of ten below 64 / 1000): 2.5 x 1.25 = 3.125 -> 3.13.
    assert p.guarantee == D("2.5") and p.cap == D("3.13")


def test_the_typical_peak_is_the_one_the_rules_warn_about():
    assert TYPICAL_PEAK_PERCENTILE == selectors.TYPICAL_PEAK_PERCENTILE


_SHAPES = {
    "flat": lambda level: lambda i, k: level,
    "bursty": lambda level: lambda i, k: level if (i * 7 + k // 12) % 9 == 0 else 0,
    "growing": lambda level: lambda i, k: level * i // 30,
    "stopping": lambda level: lambda i, k: level if i < 20 else 0,
    "daily": lambda level: lambda i, k: level if 96 <= k < 216 else level // 4,
}


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(sorted(_SHAPES)),
            st.integers(min_value=0, max_value=20),
            st.sampled_from(["inference", "training", "dev"]),
            st.integers(min_value=0, max_value=40),
        ),
        min_size=1,
        max_size=5,
    ),
    st.integers(min_value=1, max_value=48),
    st.sampled_from([D("0.25"), D("0.5"), D(1)]),
)
def test_no_suggestion_ever_breaks_a_rule_of_the_plan(namespaces, capacity, share):
    items = [
        usage(month(_SHAPES[shape](level), n=28), ns=f"ns-{i}", wc=wc, c=days_of_data)
        for i, (shape, level, wc, days_of_data) in enumerate(namespaces)
    ]
    out = suggest_cluster(items, period=JUNE, capacities={GPU: D(capacity)}, max_cap_share=share)
    cluster = ClusterFacts(name="c", capacities={GPU: D(capacity)}, max_cap_share=share)
    allocations = [AllocationFacts("c", p.namespace, p.resource, p.guarantee, p.cap) for p in out]
    peaks = [UsageFacts("c", p.namespace, p.resource, p.floor / D("0.8")) for p in out]
    findings = check_plan(cluster=cluster, allocations=allocations, usage=peaks)
    assert [f for f in findings if f.level == ERROR] == []
    assert sum(p.guarantee for p in out) <= capacity
    assert all(p.guarantee == p.guarantee.to_integral_value() for p in out)
    assert all(D(0) <= p.guarantee <= p.cap for p in out)
    # A guarantee below the seed's floor is always said, with its price or its reason.
    for p in out:
        assert (FLAG_BELOW_FLOOR in p.flags) == (p.guarantee < p.floor)


@pytest.mark.parametrize("wc", ["inference", "training", "dev"])
def test_a_suggestion_says_what_it_rests_on_in_words(wc):
    p = alone(usage(BURSTY, wc=wc))
    first = str(p.notes[0])
    assert first.startswith("busy 30 of 30 days; at ")
    assert "% of last month's demand would have been covered and " in first
    assert str(p.figures["basis"]).startswith("guarantee: the least expected cost next month")
    assert "per unit-hour: idle guaranteed 1, borrowed" in str(p.figures["prices"])


def test_a_falling_namespace_keeps_a_cap_for_what_it_ran_last_month():
    falling = month(lambda i, k: max(10 - i // 3, 1))
    p = alone(usage(falling, g=8, c=8), capacity=D(64))
    assert p.figures["trend_applied"] is True and FLAG_GROWING not in p.flags
    # The forecast falls below 10, the cap does not: it costs nothing until demand meets it.
    assert float(p.figures["forecast_peak"]) < 10
    assert p.cap == 10
    assert p.guarantee < 8
