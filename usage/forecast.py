"""Next month's demand of one namespace and resource, and what a guarantee and a cap would cost
under it: the model behind the suggestions (``usage/suggest.py``), the backtest and the what-if
words. Pure functions from data to data (no database); amounts are floats here, for speed, and
become Decimals where a suggestion is written.

*Demand* at a sample is what ran plus what waited (``allocated + pending``). A month of it comes
as one :class:`DemandDay` a day: how many samples saw each demand, and the hours one sample
stands for that day (samples of one source, ``usage/selectors.py`` says which).

**The forecast** of next month is the last four weeks of the month (28 days, so every weekday
counts four times and the weekly pattern is kept), each day moved four weeks ahead along the
month's trend: a straight line fitted to the daily mean demand, used only when it explains the
days (R² at least 0.5 over 14 days or more) and moves the level by at least 10% in four weeks.
A day's demands are then scaled by (the line four weeks later) / (the line that day), between
0 and 2: a growing namespace is forecast grown, one that stopped is forecast idle, a flat or
bursty one as it was.

**What goes wrong**, in unit-hours, under a guarantee G and a cap C (G <= C), each priced per
unit-hour (:class:`Prices`, per cluster):

- *idle*: guarantee nothing runs on, ``max(G - d, 0)``: promised, so nobody else can be;
- *borrowed*: demand above the guarantee within the cap, ``min(d, C) - min(d, G)``: runs on
  capacity others may reclaim (inference pays more: a reclaimed server drops live traffic);
- *blocked*: demand above the cap, ``max(d - C, 0)``: cannot run at all.

**The guarantee** minimises the expected cost under the forecast given the cap: each unit added
costs ``idle × P(d < unit)`` and saves ``borrowed × P(d > unit)`` (in part for the unit the
demand reaches into), so the gains of successive units never grow and the cost is convex. For a
cluster every guarantee is chosen together (:func:`allocate_guarantees`): the next unit goes to
the namespace whose next unit saves the most while one still saves and capacity is left, which
is optimal for a sum of convex costs under one budget, not a proportional cut.

**The cap** leaves the upper tail room: the highest forecast demand × 1.25, never below the
guarantee nor below the month's own highest demand (a cap costs nothing until demand meets it,
and a trend that turns down is no reason to block what ran last month), within the cluster's
share rule (the caller applies both).
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

FORECAST_DAYS = 28  # four whole weeks: each weekday four times
TREND_MIN_DAYS = 14
TREND_MIN_R2 = 0.5
TREND_MIN_CHANGE = 0.10  # of the mean level, over the four weeks ahead
TREND_MAX_FACTOR = 2.0
CAP_HEADROOM = 1.25
COVERED_SHARE_TARGET = 0.995  # a cap leaves at least this share of demand within it

# Default prices per unit-hour (a cluster may set its own): an idle guaranteed unit-hour is the
# yardstick; borrowing is cheaper than idling for batch work, dearer for inference; demand a cap
# blocks is the dearest.
DEFAULT_IDLE_PRICE = Decimal("1")
DEFAULT_BORROWED_PRICE = Decimal("0.5")
DEFAULT_INFERENCE_BORROWED_PRICE = Decimal("2")
DEFAULT_BLOCKED_PRICE = Decimal("4")


@dataclass(frozen=True)
class Prices:
    """What one unit-hour of each mismatch costs (relative; an idle unit-hour is 1 by default)."""

    idle: Decimal = DEFAULT_IDLE_PRICE
    borrowed: Decimal = DEFAULT_BORROWED_PRICE
    inference_borrowed: Decimal = DEFAULT_INFERENCE_BORROWED_PRICE
    blocked: Decimal = DEFAULT_BLOCKED_PRICE

    @classmethod
    def of_cluster(cls, cluster) -> Prices:
        """A cluster's own prices (quotas.models.Cluster's suggest_*_price fields)."""
        return cls(
            idle=cluster.suggest_idle_price,
            borrowed=cluster.suggest_borrowed_price,
            inference_borrowed=cluster.suggest_inference_borrowed_price,
            blocked=cluster.suggest_blocked_price,
        )

    def borrowed_for(self, workload_class: str) -> Decimal:
        return self.inference_borrowed if workload_class == "inference" else self.borrowed


@dataclass(frozen=True)
class DemandDay:
    """One day of one namespace and resource: samples per demand, and the hours each stands for."""

    day: date
    sample_hours: float
    counts: tuple[tuple[float, int], ...]  # (demand, samples), demand ascending

    @property
    def samples(self) -> int:
        return sum(n for _, n in self.counts)

    @property
    def mean(self) -> float:
        n = self.samples
        return sum(d * c for d, c in self.counts) / n if n else 0.0

    @property
    def peak(self) -> float:
        return self.counts[-1][0] if self.counts else 0.0


def demand_day(day: date, sample_hours: float, demands: Iterable[float]) -> DemandDay:
    """A DemandDay from a day's demand at each sample (tests and callers with raw samples)."""
    counts: dict[float, int] = {}
    for d in demands:
        counts[float(d)] = counts.get(float(d), 0) + 1
    return DemandDay(day=day, sample_hours=sample_hours, counts=tuple(sorted(counts.items())))


class Distribution:
    """Demand as weighted values (unit, hours), with the sums that price any guarantee and cap
    in O(log n): ``excess(x)`` = Σ hours × max(d - x, 0)."""

    __slots__ = ("_cum_hours", "_cum_unit_hours", "hours", "peak", "unit_hours", "values")

    def __init__(self, weighted: Iterable[tuple[float, float]]):
        merged: dict[float, float] = {}
        for value, hours in weighted:
            if hours > 0:
                merged[value] = merged.get(value, 0.0) + hours
        self.values = sorted(merged)
        self._cum_hours = [0.0]
        self._cum_unit_hours = [0.0]
        for v in self.values:
            self._cum_hours.append(self._cum_hours[-1] + merged[v])
            self._cum_unit_hours.append(self._cum_unit_hours[-1] + merged[v] * v)
        self.hours = self._cum_hours[-1]
        self.unit_hours = self._cum_unit_hours[-1]
        self.peak = self.values[-1] if self.values else 0.0

    @classmethod
    def of_days(cls, days: Iterable[DemandDay], factors: Mapping[date, float] | None = None):
        return cls(
            (d * (factors.get(day.day, 1.0) if factors else 1.0), n * day.sample_hours)
            for day in days
            for d, n in day.counts
        )

    def excess(self, x: float) -> float:
        """Unit-hours of demand above ``x``."""
        i = bisect_right(self.values, x)
        above_hours = self.hours - self._cum_hours[i]
        above_unit_hours = self.unit_hours - self._cum_unit_hours[i]
        return max(above_unit_hours - x * above_hours, 0.0)

    def hours_busy(self) -> float:
        """Hours with any demand."""
        return self.hours - self._cum_hours[bisect_right(self.values, 0.0)]

    def level_within(self, share: float) -> float:
        """The least x with at least ``share`` of the demand's unit-hours at or below x
        (``excess(x) <= (1 - share) × unit_hours``)."""
        if self.unit_hours <= 0:
            return 0.0
        allowed = (1.0 - share) * self.unit_hours
        lo, hi = 0.0, self.peak
        for _ in range(60):
            mid = (lo + hi) / 2
            if self.excess(mid) <= allowed:
                hi = mid
            else:
                lo = mid
        return hi


@dataclass(frozen=True)
class Outcome:
    """Unit-hours of one namespace under a guarantee and a cap."""

    demand: float
    covered: float  # demand within the guarantee
    borrowed: float
    blocked: float
    idle: float
    guaranteed: float

    @property
    def covered_share(self) -> float | None:
        return self.covered / self.demand if self.demand else None

    @property
    def idle_share(self) -> float | None:
        return self.idle / self.guaranteed if self.guaranteed else None

    @property
    def blocked_share(self) -> float | None:
        return self.blocked / self.demand if self.demand else None

    def cost(self, prices: Prices, workload_class: str) -> float:
        return (
            float(prices.idle) * self.idle
            + float(prices.borrowed_for(workload_class)) * self.borrowed
            + float(prices.blocked) * self.blocked
        )


def outcome(dist: Distribution, guarantee: float, cap: float) -> Outcome:
    """What ``dist`` meets under ``guarantee`` and ``cap`` (a cap below the guarantee blocks
    what is above it, as on a cluster)."""
    above_g = dist.excess(guarantee)
    above_c = dist.excess(cap)
    covered = dist.unit_hours - above_g
    return Outcome(
        demand=dist.unit_hours,
        covered=covered,
        borrowed=max(above_g - above_c, 0.0),
        blocked=above_c,
        idle=guarantee * dist.hours - covered,
        guaranteed=guarantee * dist.hours,
    )


# --------------------------------------------------------------------------------------------
# The forecast


@dataclass(frozen=True)
class Trend:
    slope: float  # units per day
    intercept: float  # the line at day offset 0
    r2: float
    level: float  # mean of the daily means
    applied: bool

    def at(self, offset: float) -> float:
        return self.intercept + self.slope * offset

    @property
    def four_week_change(self) -> float:
        """The line's move over four weeks, as a share of the mean level (0 when flat)."""
        return self.slope * FORECAST_DAYS / self.level if self.level > 0 else 0.0


def fit_trend(days: Sequence[DemandDay]) -> Trend:
    """Least squares line through the daily mean demand (x: days from the first day)."""
    if not days:
        return Trend(0.0, 0.0, 0.0, 0.0, False)
    first = min(d.day for d in days)
    xs = [float((d.day - first).days) for d in days]
    ys = [d.mean for d in days]
    n = len(days)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if n < 2 or sxx == 0:
        return Trend(0.0, my, 0.0, my, False)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    intercept = my - slope * mx
    r2 = (slope * slope * sxx / syy) if syy > 0 else 0.0
    change = abs(slope * FORECAST_DAYS / my) if my > 0 else 0.0
    applied = n >= TREND_MIN_DAYS and r2 >= TREND_MIN_R2 and change >= TREND_MIN_CHANGE
    return Trend(slope, intercept, r2, my, applied)


@dataclass(frozen=True)
class Forecast:
    distribution: Distribution
    trend: Trend
    base_days: int  # days of data the forecast is made of


def forecast(days: Sequence[DemandDay]) -> Forecast:
    """Next month's demand: the last four weeks of ``days`` moved four weeks along the trend."""
    ordered = sorted(days, key=lambda d: d.day)
    trend = fit_trend(ordered)
    if not ordered:
        return Forecast(Distribution(()), trend, 0)
    last = ordered[-1].day
    base = [d for d in ordered if (last - d.day).days < FORECAST_DAYS]
    factors: dict[date, float] | None = None
    if trend.applied:
        first = ordered[0].day
        factors = {}
        for d in base:
            x = float((d.day - first).days)
            now, later = trend.at(x), trend.at(x + FORECAST_DAYS)
            # A line at or below zero that day: its demand is noise around nothing.
            factor = max(later, 0.0) / now if now > 0 else float(trend.slope >= 0)
            factors[d.day] = min(max(factor, 0.0), TREND_MAX_FACTOR)
    return Forecast(Distribution.of_days(base, factors), trend, len(base))


# --------------------------------------------------------------------------------------------
# Guarantees and caps


def suggest_cap(dist: Distribution, *, step: float = 1.0) -> float:
    """Room for the upper tail: the highest forecast demand × 1.25, and never less than the
    level that keeps 99.5% of the forecast demand within it; rounded up to ``step``."""
    level = max(dist.peak * CAP_HEADROOM, dist.level_within(COVERED_SHARE_TARGET))
    return _round_up(level, step)


def _round_up(value: float, step: float) -> float:
    # A hair below a step (floating point) is that step, not the next one.
    return math.ceil(value / step - 1e-9) * step if value > 0 else 0.0


def step_gains(
    dist: Distribution,
    *,
    cap: float,
    step: float,
    idle_price: float,
    borrowed_price: float,
    start: float = 0.0,
) -> list[float]:
    """What each successive ``step`` of guarantee from ``start`` up to ``cap`` saves of the
    expected cost (borrowed saved minus idle added). Never grows: the cost is convex."""
    gains = []
    g = start
    while g + step <= cap + 1e-9:
        covered = dist.excess(g) - dist.excess(g + step)  # unit-hours the step covers
        idle = step * dist.hours - covered
        gains.append(borrowed_price * covered - idle_price * idle)
        g += step
    return gains


@dataclass(frozen=True)
class Candidate:
    """One namespace of a cluster and resource, as the allocation of guarantees sees it."""

    key: str
    distribution: Distribution
    cap: float
    borrowed_price: float
    minimum: float = 0.0  # a guarantee it keeps whatever it saves (taken first)


def allocate_guarantees(
    candidates: Sequence[Candidate],
    *,
    capacity: float | None,
    step: float,
    idle_price: float,
) -> dict[str, float]:
    """Guarantees of every candidate, chosen together: one ``step`` at a time to the candidate
    whose next step saves the most, while one still saves and ``capacity`` (None: unbounded)
    is left. Each first gets its ``minimum`` (in whole steps). Ties go to the key, so the result
    does not depend on the order given."""
    base = {c.key: math.ceil(c.minimum / step - 1e-9) for c in candidates}
    gains = {
        c.key: step_gains(
            c.distribution,
            cap=c.cap,
            step=step,
            idle_price=idle_price,
            borrowed_price=c.borrowed_price,
            start=base[c.key] * step,
        )
        for c in candidates
    }
    taken = dict.fromkeys(gains, 0)
    heap = [(-g[0], key) for key, g in gains.items() if g]
    heapq.heapify(heap)
    left = math.inf if capacity is None else math.floor(capacity / step + 1e-9)
    left -= sum(base.values())
    while heap and left > 0:
        negative, key = heapq.heappop(heap)
        if -negative <= 1e-12:
            break
        taken[key] += 1
        left -= 1
        if taken[key] < len(gains[key]):
            heapq.heappush(heap, (-gains[key][taken[key]], key))
    return {key: (base[key] + n) * step for key, n in taken.items()}


def as_decimal(value: float, *, whole: bool) -> Decimal:
    """A float amount as the Decimal a suggestion stores (whole units, else 3 places)."""
    if whole:
        return Decimal(round(value))
    return Decimal(str(round(value, 3)))
