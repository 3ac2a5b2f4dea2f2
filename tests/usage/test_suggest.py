"""Suggestion maths, hand-checked: flat, spiky, inference against training, growing, idle,
over-subscribed guarantees, thin data, no data; and every suggestion passes the plan rules."""

from datetime import date, timedelta
from decimal import Decimal

import pytest

from quotas.rules import AllocationFacts, ClusterFacts, UsageFacts, check_plan
from tests.support.usage import JUNE_PERIOD as JUNE
from tests.support.usage import Day, days
from usage import selectors
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
    scale_guarantees,
    suggest_allocation,
    suggest_cluster,
)

D = Decimal
NONE = Decimal(0)
FEB = Period(start=date(2025, 2, 1), end=date(2025, 2, 28), today=date(2025, 3, 1))
SHARE = D("0.5")


def usage(days_, *, ns="team-a", wc="training", g=0, c=0, kind="gpu") -> AllocationUsage:
    return AllocationUsage(
        namespace=ns,
        resource="nvidia.com/gpu",
        workload_class=wc,
        resource_kind=kind,
        current_guarantee=D(g),
        current_cap=D(c),
        days=days_,
        unit="GPU",
    )


def test_flat_usage_brings_an_oversized_allocation_down_and_flags_the_idle_gpus():
    p = suggest_allocation(
        usage(days(JUNE, peak=4), g=6, c=10), period=JUNE, capacity=D(16), max_cap_share=SHARE
    )
    # typical peak 4, floor 3.2, recent mean 4 -> 4; cap ceil(4 x 1.25) = 5
    assert (p.guarantee, p.cap) == (4, 5)
    assert p.confidence == "high"
    assert FLAG_IDLE in p.flags
    assert any("2 of 6 guaranteed GPU never used" in str(n) for n in p.notes)
    f = p.figures
    assert f["days_of_data"] == 30 and f["typical_daily_peak"] == "4" and f["peak_max"] == "4"
    assert f["gpu_hours"] == "2880"  # 4 GPUs x 24 h x 30 days
    assert len(f["daily_peaks"]) == 30


def test_spiky_training_gets_the_rule_floor_and_a_cap_bounded_by_the_share():
    spiky = [
        Day(d.day, D(10), D(2), D(1)) if d.day.day in (10, 20) else Day(d.day, D(2), D(2), D(1))
        for d in days(JUNE, peak=2)
    ]
    p = suggest_allocation(usage(spiky), period=JUNE, capacity=D(16), max_cap_share=SHARE)
    # daily peaks: 28 x 2 and 2 x 10; p95 at rank 27.55 -> 2 + 8 x 0.55 = 6.4; floor 5.12 -> 6
    assert p.figures["typical_daily_peak"] == "6.4"
    assert p.guarantee == 6
    # cap ceil(10 x 1.25) = 13 > 50% of 16 -> 8
    assert p.cap == 8 and FLAG_SHARE in p.flags
    assert any("cap 13 lowered to 8" in str(n) for n in p.notes)


def test_a_steady_namespace_is_guaranteed_its_level_a_bursty_one_the_rule_floor():
    steady = suggest_allocation(
        usage(days(JUNE, peak=9, mean=8), wc="inference"),
        period=JUNE,
        capacity=D(32),
        max_cap_share=SHARE,
    )
    bursty = suggest_allocation(
        usage(days(JUNE, peak=9, mean=2), wc="training"),
        period=JUNE,
        capacity=D(32),
        max_cap_share=SHARE,
    )
    assert steady.guarantee == 8  # its mean 8 is above 80% of 9 = 7.2
    assert bursty.guarantee == 8  # ceil(7.2): the least the rules allow
    assert steady.cap == bursty.cap == 12  # ceil(9 x 1.25)
    assert steady.figures["recent_level"] == "8" and bursty.figures["floor"] == "7.2"


def test_growing_week_over_week_raises_the_cap_not_the_guarantee():
    growing = [
        Day(FEB.start + timedelta(i), peak=D(4 + 2 * (i // 7)), p95=D(0), mean=D(2 + i // 7))
        for i in range(28)
    ]
    p = suggest_allocation(usage(growing), period=FEB, capacity=D(64), max_cap_share=SHARE)
    assert p.figures["weekly_means"] == ["2", "3", "4", "5"]
    assert p.figures["growth_per_week"] == "1.25"
    # typical peak 10 -> floor 8 (recent mean 5 is below); cap ceil(10 x 1.25 x 1.25 = 15.625)
    assert (p.guarantee, p.cap) == (8, 16)
    assert FLAG_GROWING in p.flags


def test_growth_is_bounded_and_needs_two_rising_weeks():
    from usage.suggest import weekly_growth

    assert weekly_growth([D(1), D(2), D(8)]) == D("1.25")
    assert weekly_growth([D(3), D(2), D(4)]) == 1  # one rising week is not a trend
    assert weekly_growth([D(1), D(2)]) == 1
    # Creeping up by a percent a week is flat, not a trend to raise a cap for.
    assert weekly_growth([D("0.30"), D("0.303"), D("0.306")]) == 1
    assert weekly_growth([D("0.30"), D("0.33"), D("0.363")]) == D("1.1")
    assert weekly_growth([D(0), D(1), D(2)]) == 1  # nothing to grow from


def test_an_idle_namespace_releases_its_guarantee_and_keeps_its_cap():
    p = suggest_allocation(
        usage(days(JUNE, peak=0), g=4, c=8), period=JUNE, capacity=D(16), max_cap_share=SHARE
    )
    assert (p.guarantee, p.cap) == (0, 8)
    assert FLAG_IDLE in p.flags
    assert any("4 of 4 guaranteed GPU never used" in str(n) for n in p.notes)


def test_low_utilization_is_flagged():
    p = suggest_allocation(
        usage(days(JUNE, peak=4, utilization=D(12))),
        period=JUNE,
        capacity=D(16),
        max_cap_share=SHARE,
    )
    assert FLAG_LOW_UTILIZATION in p.flags and p.figures["utilization_mean"] == "12"


def test_over_subscribed_guarantees_are_scaled_proportionally_with_largest_remainder():
    items = [
        usage(days(JUNE, peak=6), ns="a"),
        usage(days(JUNE, peak=4), ns="b"),
        usage(days(JUNE, peak=3), ns="c"),
    ]
    out = suggest_cluster(
        items,
        period=JUNE,
        capacities={"nvidia.com/gpu": D(10)},
        max_cap_share=D(1),
        cluster="demo",
    )
    # 6 + 4 + 3 = 13 > 10: x 10/13 -> 4.615, 3.077, 2.308 -> 4, 3, 2 and the one left over
    # goes to the largest remainder (a: 0.615)
    assert [p.guarantee for p in out] == [5, 3, 2]
    assert sum(p.guarantee for p in out) == 10
    assert all(FLAG_SCALED in p.flags for p in out)
    assert "sum to 13 nvidia.com/gpu, above capacity 10" in str(out[0].notes[-1])
    assert out[0].figures["unscaled_guarantee"] == "6"
    # b (3 < 80% of 4) and c (2 < 2.4) now fall below the 80% floor; a (5 >= 4.8) does not
    assert [FLAG_BELOW_FLOOR in p.flags for p in out] == [False, True, True]


def test_scaling_leaves_a_plan_within_capacity_alone_and_ties_go_by_size_then_name():
    items = [usage(days(JUNE, peak=p), ns=ns) for ns, p in (("x", 3), ("y", 3), ("z", 3))]
    fits = suggest_cluster(
        items, period=JUNE, capacities={"nvidia.com/gpu": D(9)}, max_cap_share=D(1)
    )
    assert [p.guarantee for p in fits] == [3, 3, 3] and not any(
        FLAG_SCALED in p.flags for p in fits
    )
    scaled = scale_guarantees(fits, capacity=D(7))
    # 3 x 7/9 = 2.333 each: 2, 2, 2 and one left over for the first by name
    assert [p.guarantee for p in scaled] == [3, 2, 2]


def test_thin_data_lowers_nothing_but_the_rules_still_apply():
    p = suggest_allocation(
        usage(days(JUNE, n=5, peak=2), g=6, c=10),
        period=JUNE,
        capacity=D(16),
        max_cap_share=SHARE,
    )
    assert p.guarantee == 6  # computed 2, not lowered on 5 days of data
    assert p.cap == 8  # the current 10 is above 50% of 16
    assert p.confidence == "low" and FLAG_THIN in p.flags
    assert any("not lowered on 5 days of data" in str(n) for n in p.notes)


def test_a_month_not_over_says_so():
    running = Period(start=JUNE.start, end=JUNE.end, today=date(2025, 6, 25))
    p = suggest_allocation(
        usage(days(JUNE, n=24, peak=2)), period=running, capacity=D(16), max_cap_share=SHARE
    )
    assert p.confidence == "medium" and FLAG_NOT_OVER in p.flags
    assert any("the month is not over" in str(n) for n in p.notes)


def test_no_data_keeps_the_current_values():
    p = suggest_allocation(usage([], g=2, c=4), period=JUNE, capacity=D(16), max_cap_share=SHARE)
    assert (p.guarantee, p.cap, p.confidence) == (2, 4, "none")
    assert FLAG_NO_DATA in p.flags and not p.changes


def test_cpu_amounts_are_not_rounded_to_whole_units():
    p = suggest_allocation(
        usage(days(JUNE, peak="2.5"), kind="cpu"), period=JUNE, capacity=None, max_cap_share=SHARE
    )
    assert p.guarantee == D("2.5") and p.cap == D("3.125")


def test_the_typical_peak_is_the_one_the_rules_warn_about():
    assert TYPICAL_PEAK_PERCENTILE == selectors.TYPICAL_PEAK_PERCENTILE


@pytest.mark.parametrize(
    "shape",
    [
        {"peak": 4},
        {"peak": 9, "p95": 9, "mean": 5},
        {"peak": 7, "p95": 3, "mean": 1},
        {"peak": 0},
    ],
)
@pytest.mark.parametrize("wc", ["inference", "training", "dev"])
def test_every_suggestion_passes_the_plan_rules_without_the_peak_warning(shape, wc):
    items = [usage(days(JUNE, **shape), ns=f"ns-{i}", wc=wc) for i in range(3)]
    out = suggest_cluster(
        items, period=JUNE, capacities={"nvidia.com/gpu": D(32)}, max_cap_share=SHARE
    )
    cluster = ClusterFacts(name="c", capacities={"nvidia.com/gpu": D(32)}, max_cap_share=SHARE)
    allocations = [AllocationFacts("c", p.namespace, p.resource, p.guarantee, p.cap) for p in out]
    peaks = [
        UsageFacts("c", p.namespace, p.resource, D(p.figures["typical_daily_peak"])) for p in out
    ]
    assert check_plan(cluster=cluster, allocations=allocations, usage=peaks) == []
    assert all(p.guarantee == p.guarantee.to_integral_value() for p in out)
