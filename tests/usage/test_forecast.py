"""The demand model behind the suggestions (usage/forecast.py): the sums that price a guarantee
and a cap, the trend and the forecast, and the greedy choice of guarantees, each against a
brute-force count over the samples."""

import random
from datetime import date, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from usage.forecast import (
    Candidate,
    DemandDay,
    Distribution,
    Prices,
    allocate_guarantees,
    demand_day,
    fit_trend,
    forecast,
    outcome,
    step_gains,
    suggest_cap,
)

START = date(2025, 6, 1)
HOUR = 1.0


def month(fn, days=30, per_day=24):
    """``days`` days of ``per_day`` hourly samples, demand ``fn(day index, sample index)``."""
    return [
        demand_day(START + timedelta(days=i), HOUR, [fn(i, k) for k in range(per_day)])
        for i in range(days)
    ]


def brute(values, g, c):
    """Unit-hours of (demand, covered, borrowed, blocked, idle) counted sample by sample."""
    demand = sum(values)
    covered = sum(min(v, g) for v in values)
    borrowed = sum(max(min(v, c) - g, 0) for v in values)
    blocked = sum(max(v - c, 0) for v in values)
    idle = sum(max(g - v, 0) for v in values)
    return demand, covered, borrowed, blocked, idle


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=12), min_size=1, max_size=60),
    st.integers(min_value=0, max_value=14),
    st.integers(min_value=0, max_value=14),
)
def test_the_outcome_of_a_guarantee_and_cap_is_the_sample_by_sample_count(values, g, extra):
    c = g + extra
    dist = Distribution((float(v), HOUR) for v in values)
    got = outcome(dist, float(g), float(c))
    want = brute(values, g, c)
    have = (got.demand, got.covered, got.borrowed, got.blocked, got.idle)
    assert have == pytest.approx(want, abs=1e-6)
    assert got.guaranteed == pytest.approx(g * len(values))


def test_days_weigh_their_samples_by_the_hours_each_stands_for():
    # One day sampled hourly, one every 5 minutes: both weigh 24 hours.
    hourly = demand_day(START, 1.0, [2] * 24)
    fine = demand_day(START + timedelta(1), 5 / 60, [4] * 288)
    dist = Distribution.of_days([hourly, fine])
    assert dist.hours == pytest.approx(48)
    assert dist.unit_hours == pytest.approx(2 * 24 + 4 * 24)
    assert (hourly.mean, hourly.peak, fine.samples) == (2, 2, 288)


def test_the_level_within_leaves_the_asked_share_of_demand_below_it():
    dist = Distribution((float(v), HOUR) for v in [1] * 990 + [10] * 10)
    level = dist.level_within(0.995)
    assert dist.excess(level) <= 0.005 * dist.unit_hours + 1e-9
    assert dist.excess(level - 0.01) > 0.005 * dist.unit_hours


def test_a_flat_or_noisy_month_has_no_trend_a_growing_one_has():
    rnd = random.Random(7)
    flat = fit_trend(month(lambda i, k: 4))
    noisy = fit_trend(month(lambda i, k: rnd.choice([1, 2, 8])))
    growing = fit_trend(month(lambda i, k: 2 + i * 0.2))
    assert not flat.applied and not noisy.applied
    assert growing.applied and growing.slope == pytest.approx(0.2)
    assert growing.r2 == pytest.approx(1)
    # 0.2 a day over four weeks is 5.6 on a mean level of 4.9
    assert growing.four_week_change == pytest.approx(5.6 / 4.9)


def test_the_forecast_is_the_last_four_weeks_moved_along_the_trend():
    growing = forecast(month(lambda i, k: 2 + i * 0.2))
    assert growing.base_days == 28
    # day 29 (7.8) four weeks later: 7.8 + 5.6 = 13.4; day 2 (2.4) would be 8.0, but no day
    # is forecast more than twice what it was: 4.8
    assert growing.distribution.peak == pytest.approx(13.4)
    assert min(growing.distribution.values) == pytest.approx(4.8)

    flat = forecast(month(lambda i, k: 3))
    assert flat.distribution.values == [3.0] and flat.distribution.hours == 28 * 24


def test_a_namespace_that_stopped_is_forecast_idle():
    stopped = forecast(month(lambda i, k: 5 if i < 18 else 0))
    assert stopped.trend.applied and stopped.trend.slope < 0
    assert stopped.distribution.peak == 0


def test_the_forecast_keeps_the_weekly_pattern():
    # Busy on weekdays only: four weeks keep 20 busy days of 28.
    weekdays = forecast(month(lambda i, k: 6 if (START + timedelta(i)).weekday() < 5 else 0))
    busy = weekdays.distribution.hours - weekdays.distribution.hours_busy()
    assert weekdays.distribution.hours_busy() == 20 * 24 and busy == 8 * 24


def test_the_cap_leaves_the_tail_room():
    dist = Distribution((float(v), HOUR) for v in [2] * 100 + [7])
    assert suggest_cap(dist) == 9  # 7 x 1.25 = 8.75 -> 9
    assert suggest_cap(Distribution(())) == 0


def test_step_gains_never_grow_and_price_idle_against_borrowed():
    values = [0, 1, 1, 2, 2, 2, 3, 4, 6, 9]
    dist = Distribution((float(v), HOUR) for v in values)
    gains = step_gains(dist, cap=9, step=1, idle_price=1, borrowed_price=1)
    assert gains == sorted(gains, reverse=True)
    # unit 1 covers 9 of the 10 samples and idles 1: 9 - 1 = 8
    assert gains[0] == pytest.approx(8)
    # borrowing at half the price of idling: unit 3 covers 4 samples, idles 6 -> 2 - 6 = -4
    cheap = step_gains(dist, cap=9, step=1, idle_price=1, borrowed_price=0.5)
    assert cheap[2] == pytest.approx(0.5 * 4 - 6)


def _brute_best(candidates, capacity, idle_price):
    """The least total expected cost over every split of whole units (small cases)."""
    best, best_cost = None, None

    def cost(c, g):
        o = outcome(c.distribution, g, c.cap)
        return idle_price * o.idle + c.borrowed_price * o.borrowed

    def walk(i, left, chosen):
        nonlocal best, best_cost
        if i == len(candidates):
            total = sum(cost(c, g) for c, g in zip(candidates, chosen, strict=True))
            if best_cost is None or total < best_cost - 1e-9:
                best, best_cost = list(chosen), total
            return
        for g in range(int(min(left, candidates[i].cap)) + 1):
            walk(i + 1, left - g, [*chosen, g])

    walk(0, capacity, [])
    return best_cost


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(min_value=0, max_value=6), min_size=1, max_size=12),
            st.integers(min_value=0, max_value=6),
            st.sampled_from([0.5, 1.0, 2.0]),
        ),
        min_size=1,
        max_size=3,
    ),
    st.integers(min_value=0, max_value=10),
)
def test_guarantees_chosen_together_cost_the_least_any_split_of_the_capacity_can(
    namespaces, capacity
):
    candidates = [
        Candidate(
            key=f"ns{i}",
            distribution=Distribution((float(v), HOUR) for v in values),
            cap=float(cap),
            borrowed_price=price,
        )
        for i, (values, cap, price) in enumerate(namespaces)
    ]
    chosen = allocate_guarantees(candidates, capacity=capacity, step=1, idle_price=1)
    assert sum(chosen.values()) <= capacity
    assert all(0 <= chosen[c.key] <= c.cap for c in candidates)
    total = sum(
        outcome(c.distribution, chosen[c.key], c.cap).idle
        + c.borrowed_price * outcome(c.distribution, chosen[c.key], c.cap).borrowed
        for c in candidates
    )
    assert total == pytest.approx(_brute_best(candidates, capacity, 1.0), abs=1e-6)


def test_a_minimum_is_kept_first_and_counts_against_the_capacity():
    idle = Candidate("idle", Distribution([(0.0, HOUR)] * 10), cap=4, borrowed_price=1, minimum=3)
    busy = Candidate("busy", Distribution([(5.0, HOUR)] * 10), cap=5, borrowed_price=1)
    chosen = allocate_guarantees([idle, busy], capacity=6, step=1, idle_price=1)
    assert chosen == {"idle": 3, "busy": 3}


def test_prices_of_inference_borrowing_differ():
    prices = Prices()
    assert prices.borrowed_for("inference") == prices.inference_borrowed
    assert prices.borrowed_for("training") == prices.borrowed == prices.borrowed_for("dev")


def test_a_day_without_samples_weighs_nothing():
    empty = DemandDay(day=START, sample_hours=1.0, counts=())
    assert (empty.samples, empty.mean, empty.peak) == (0, 0.0, 0.0)
    assert Distribution.of_days([empty]).hours == 0
