"""Suggestion maths: next month's guarantee and cap of every team namespace and resource, from
a month of its 5-minute demand and daily rollups, within the rules of the guarantee + elastic
model.

Pure functions from data to data (no database). ``usage/suggestions.py`` feeds them the month
and stores what they return. Notes and the "how" figure are :class:`quotas.texts.Text` (a msgid
and its parameters), stored as such and rendered in the reader's language when shown.

How a cluster's suggestions are made (the model is in ``usage/forecast.py``):

- **Forecast**: next month's demand (allocated + pending at each sample) is the month's last
  four weeks, moved four weeks along the month's trend where a trend explains the days.
- **Cap** = the highest forecast demand × 1.25 (at least what keeps 99.5% of the forecast
  demand within it, and never below the month's own highest demand), rounded up, within the
  cluster's max share of capacity. A namespace with nothing forecast keeps its cap, for
  borrowing when its work returns.
- **Guarantees**, per resource, all together: each unit of guarantee is priced by what it
  would leave idle (the cluster's idle price per unit-hour) against the borrowing it would save
  (the borrowed price, dearer for inference); the next unit goes to the namespace where it
  saves the most, while one still saves and capacity is left. A namespace's guarantee held
  below its own best by capacity says so (``scaled_down``).
- **The seed's floor** (80% of the typical daily peak, the p95 of the daily peaks) is a
  warning, not a rule: a guarantee below it is flagged with what following it would cost.
- **Data**: with fewer than 7 days of data nothing is lowered below the current values; the
  confidence is ``high`` (a finished month with 21+ days of data), ``medium`` (14+ days, or the
  month not over), ``low`` (fewer than 14 days) or ``none`` (no data: current values kept,
  their guarantee counted before the others are chosen).
- **Words**: each suggestion says what it rests on (busy days, and last month under the
  suggested values: demand covered by the guarantee, guarantee idle, demand above the cap),
  and flags guaranteed-but-idle units and low GPU utilization.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Protocol

from django.utils.translation import gettext_noop

from common.amounts import UNIT_WORDS, format_amount
from quotas.rules import PEAK_SHARE
from quotas.texts import Text
from usage.forecast import (
    CAP_HEADROOM,
    Candidate,
    DemandDay,
    Distribution,
    Forecast,
    Prices,
    allocate_guarantees,
    as_decimal,
    forecast,
    outcome,
    suggest_cap,
)
from usage.stats import percentile

ZERO = Decimal(0)
TYPICAL_PEAK_PERCENTILE = Decimal("0.95")  # as usage.selectors (the rules' warning)
WEEK_MIN_DAYS = 4
DEFAULT_PRICES = Prices()
LOW_UTILIZATION = Decimal(20)  # percent
THIN_DAYS = 7
MEDIUM_DAYS = 14
HIGH_DAYS = 21
AMOUNT_PLACES = Decimal("0.001")
TENTH = Decimal("0.1")

# Resource kinds whose amounts are whole units in quotas (Kubernetes extended resources).
WHOLE_UNIT_KINDS = frozenset({"gpu", "mig", "vgpu_memory", "vgpu_cores"})

# Flags (stable ids; pages and the API show them).
FLAG_IDLE = "idle_guarantee"
FLAG_LOW_UTILIZATION = "low_utilization"
FLAG_SCALED = "scaled_down"
FLAG_SHARE = "capped_by_share"
FLAG_BELOW_FLOOR = "below_peak_floor"
FLAG_GROWING = "growing"
FLAG_THIN = "thin_data"
FLAG_NOT_OVER = "month_not_over"
FLAG_NO_DATA = "no_data"


class DailyUsage(Protocol):
    """One day of one namespace and resource (``usage.selectors.UsageDay`` is one)."""

    day: date
    samples: int
    peak: Decimal
    p95: Decimal
    mean: Decimal
    utilization_mean: Decimal | None
    gpu_hours: Decimal
    borrowed_gpu_hours: Decimal
    idle_guaranteed_gpu_hours: Decimal
    pending_peak: Decimal
    pending_wait_seconds: int | None
    pending_wait_mean_seconds: int | None
    evictions: int


@dataclass(frozen=True)
class Period:
    """The month the usage comes from; ``today`` tells whether it is over."""

    start: date
    end: date
    today: date

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1

    @property
    def is_over(self) -> bool:
        return self.today > self.end


@dataclass(frozen=True)
class AllocationUsage:
    """What one suggestion starts from: the allocation as it is and the month's days."""

    namespace: str
    resource: str
    workload_class: str  # inference, training, dev
    resource_kind: str  # quotas Resource.Kind value
    current_guarantee: Decimal
    current_cap: Decimal
    days: Sequence[DailyUsage]
    unit: str = ""
    # The month's 5-minute demand (usage.selectors.demand_history_for); without it the daily
    # rollups stand in (each day at its mean, with its peak for an hour).
    demand: Sequence[DemandDay] = ()

    @property
    def whole_units(self) -> bool:
        return self.resource_kind in WHOLE_UNIT_KINDS


@dataclass(frozen=True)
class Proposal:
    namespace: str
    resource: str
    current_guarantee: Decimal
    current_cap: Decimal
    guarantee: Decimal
    cap: Decimal
    confidence: str
    figures: dict = field(default_factory=dict)
    notes: tuple[Text, ...] = ()
    flags: tuple[str, ...] = ()
    whole_units: bool = True
    floor: Decimal = ZERO  # 80% of the typical daily peak

    @property
    def changes(self) -> bool:
        return self.guarantee != self.current_guarantee or self.cap != self.current_cap


# --------------------------------------------------------------------------------------------
# Rounding


def round_up(value: Decimal, *, whole: bool) -> Decimal:
    if whole:
        return value.to_integral_value(rounding=ROUND_CEILING)
    return value.quantize(AMOUNT_PLACES, rounding=ROUND_CEILING)


def round_down(value: Decimal, *, whole: bool) -> Decimal:
    if whole:
        return value.to_integral_value(rounding=ROUND_FLOOR)
    return value.quantize(AMOUNT_PLACES, rounding=ROUND_FLOOR)


def unit_text(unit: str) -> Text | str:
    """A unit in a note: a word of the catalogue (slice, core) as a text read in the reader's
    language (common.amounts.UNIT_WORDS), anything else (GPU, MiB, a resource name) as it is."""
    return Text(unit, context="unit") if unit in UNIT_WORDS else unit


def _ratio(value: Decimal) -> str:
    return format_amount(value.quantize(Decimal("0.01")))


# --------------------------------------------------------------------------------------------
# Figures


def typical_daily_peak(days: Sequence[DailyUsage]) -> Decimal:
    return percentile([d.peak for d in days], TYPICAL_PEAK_PERCENTILE)


def weekly_means(days: Sequence[DailyUsage], start: date) -> list[Decimal]:
    """Mean of the daily means of each 7-day week from ``start`` that has at least 4 days."""
    weeks: dict[int, list[Decimal]] = defaultdict(list)
    for d in days:
        weeks[(d.day - start).days // 7].append(d.mean)
    return [
        sum(values, ZERO) / len(values)
        for _, values in sorted(weeks.items())
        if len(values) >= WEEK_MIN_DAYS
    ]


def _hours(value: Decimal) -> str:
    return format_amount(value.quantize(TENTH))


def month_figures(days: Sequence[DailyUsage], period: Period) -> dict:
    """The numbers behind a suggestion, as JSON (amounts as strings)."""
    ordered = sorted(days, key=lambda d: d.day)
    utilization = [
        (d.utilization_mean, d.samples) for d in ordered if d.utilization_mean is not None
    ]
    weighted = sum((Decimal(n) for _, n in utilization), ZERO)
    waits = [d.pending_wait_seconds for d in ordered if d.pending_wait_seconds is not None]
    mean_waits = [d.pending_wait_mean_seconds for d in ordered if d.pending_wait_mean_seconds]
    figures: dict = {
        "days_of_data": len(ordered),
        "days_in_period": period.days,
        "period": [period.start.isoformat(), period.end.isoformat()],
        "daily_peaks": [[d.day.isoformat(), format_amount(d.peak)] for d in ordered],
    }
    if not ordered:
        return figures
    demand = [d.peak + d.pending_peak for d in ordered]
    figures.update(
        {
            "peak_max": format_amount(max(d.peak for d in ordered)),
            "demand_peak_max": format_amount(max(demand)),
            "typical_daily_peak": format_amount(typical_daily_peak(ordered)),
            "p95_median": format_amount(percentile([d.p95 for d in ordered], Decimal("0.5"))),
            "mean": format_amount(
                (sum((d.mean for d in ordered), ZERO) / len(ordered)).quantize(AMOUNT_PLACES)
            ),
            "utilization_mean": (
                format_amount(
                    (sum((u * n for u, n in utilization), ZERO) / weighted).quantize(Decimal("0.1"))
                )
                if weighted
                else None
            ),
            "gpu_hours": _hours(sum((d.gpu_hours for d in ordered), ZERO)),
            "borrowed_gpu_hours": _hours(sum((d.borrowed_gpu_hours for d in ordered), ZERO)),
            "idle_guaranteed_gpu_hours": _hours(
                sum((d.idle_guaranteed_gpu_hours for d in ordered), ZERO)
            ),
            "pending_peak": format_amount(max(d.pending_peak for d in ordered)),
            "pending_wait_max_seconds": max(waits) if waits else None,
            "pending_wait_mean_seconds": (
                round(sum(mean_waits) / len(mean_waits)) if mean_waits else None
            ),
            "evictions": sum(d.evictions for d in ordered),
        }
    )
    return figures


# --------------------------------------------------------------------------------------------
# One allocation


def _confidence(n_days: int, period: Period) -> tuple[str, list[Text], list[str]]:
    notes: list[Text] = []
    flags: list[str] = []
    if n_days == 0:
        return (
            "none",
            [Text.of(gettext_noop("no usage data for this month: current values kept"))],
            [FLAG_NO_DATA],
        )
    if n_days < MEDIUM_DAYS:
        level = "low"
        flags.append(FLAG_THIN)
        notes.append(
            Text.of(
                gettext_noop("thin data: %(days)s of %(month_days)s days have usage"),
                days=n_days,
                month_days=period.days,
            )
        )
    elif n_days < HIGH_DAYS:
        level = "medium"
        notes.append(
            Text.of(
                gettext_noop("%(days)s of %(month_days)s days have usage"),
                days=n_days,
                month_days=period.days,
            )
        )
    else:
        level = "high"
    if not period.is_over:
        flags.append(FLAG_NOT_OVER)
        notes.append(
            Text.of(
                gettext_noop(
                    "the month is not over (until %(end)s): figures of the days before %(today)s"
                ),
                end=period.end.isoformat(),
                today=period.today.isoformat(),
            )
        )
        if level == "high":
            level = "medium"
    return level, notes, flags


# --------------------------------------------------------------------------------------------
# One allocation: what the month says of it, before the guarantees of the cluster are chosen


@dataclass
class _Prepared:
    """An allocation's month read, its cap chosen; its guarantee still to be chosen."""

    item: AllocationUsage
    days: list
    figures: dict
    confidence: str
    notes: list[Text]
    flags: list[str]
    unit: Text | str
    fixed: bool = False  # no data: current values kept
    actual: Distribution | None = None  # the month's demand
    forecast: Forecast | None = None
    cap: Decimal = ZERO
    minimum: Decimal = ZERO  # a guarantee not lowered below (thin data)
    floor: Decimal = ZERO
    demand_max: Decimal = ZERO
    busy_days: int = 0
    data_days: int = 0


def _month_demand(item: AllocationUsage, days: Sequence[DailyUsage], period: Period):
    """The month's demand days: the samples' when there are any, else one made of each day's
    rollup (its mean demand for 23 hours and its peak demand for one), as for a month whose
    samples were pruned."""
    demand = [d for d in item.demand if period.start <= d.day <= period.end]
    if demand:
        return demand
    return [
        DemandDay(
            day=d.day,
            sample_hours=1.0,
            counts=tuple(
                sorted(
                    {
                        float(d.mean): 23,
                        float(d.peak + d.pending_peak): 1,
                    }.items()
                )
            )
            if d.mean != d.peak + d.pending_peak
            else ((float(d.mean), 24),),
        )
        for d in days
    ]


def _prepare(
    item: AllocationUsage, *, period: Period, capacity: Decimal | None, max_cap_share: Decimal
) -> _Prepared:
    whole = item.whole_units
    unit = unit_text(item.unit or item.resource)
    days = [d for d in item.days if period.start <= d.day <= period.end]
    demand_days = _month_demand(item, days, period)
    figures = month_figures(days, period)
    n_days = len(days) or len(demand_days)
    confidence, notes, flags = _confidence(n_days, period)
    prepared = _Prepared(item, days, figures, confidence, notes, flags, unit)
    if not demand_days:
        prepared.fixed = True
        return prepared

    actual = Distribution.of_days(demand_days)
    fc = forecast(demand_days)
    prepared.actual, prepared.forecast = actual, fc
    demand_max = Decimal(str(actual.peak))
    if days:
        typical = typical_daily_peak(days)
    else:
        typical = percentile([Decimal(str(d.peak)) for d in demand_days], TYPICAL_PEAK_PERCENTILE)
    floor = PEAK_SHARE * typical
    prepared.floor, prepared.demand_max = floor, demand_max
    prepared.busy_days = sum(1 for d in demand_days if d.peak > 0)
    prepared.data_days = n_days
    weeks = weekly_means(days, period.start) if days else []
    trend = fc.trend
    figures.update(
        {
            "floor": format_amount(floor.quantize(AMOUNT_PLACES)),
            "weekly_means": [format_amount(w.quantize(AMOUNT_PLACES)) for w in weeks],
            "busy_days": prepared.busy_days,
            "trend_per_week": format_amount(_amount(trend.slope * 7, places=TENTH * TENTH)),
            "trend_r2": format_amount(_amount(trend.r2, places=TENTH * TENTH)),
            "trend_applied": trend.applied,
            "forecast_peak": format_amount(_amount(fc.distribution.peak)),
        }
    )
    if trend.applied and trend.slope > 0:
        flags.append(FLAG_GROWING)
    if trend.applied:
        notes.append(
            Text.of(
                gettext_noop(
                    "trend %(change)s%% over four weeks (%(per_week)s %(unit)s a week, R² "
                    "%(r2)s): next month forecast from the last four weeks moved along it"
                ),
                change=_signed(_amount(trend.four_week_change * 100, places=Decimal(1))),
                per_week=_signed(_amount(trend.slope * 7, places=TENTH * TENTH)),
                unit=unit,
                r2=format_amount(_amount(trend.r2, places=TENTH * TENTH)),
            )
        )

    step = _step(item, capacity)
    if fc.distribution.peak > 0:
        cap = Decimal(str(suggest_cap(fc.distribution, step=float(step))))
        # Never below what the month itself needed: a trend that turns down is no reason to
        # block what ran (on the trace a cap below it blocked 2% of the next weeks' demand).
        cap = max(round_up(cap, whole=whole), round_up(demand_max, whole=whole))
    else:
        # Nothing forecast (unused, or stopped): the cap stays, and holds what the month needed,
        # for borrowing when work returns.
        cap = max(item.current_cap, round_up(demand_max, whole=whole))
        notes.append(
            Text.of(
                gettext_noop(
                    "nothing forecast for next month: guarantee released, cap kept for borrowing"
                )
            )
        )
    minimum = ZERO
    if n_days < THIN_DAYS and (cap < item.current_cap or item.current_guarantee > 0):
        cap = max(cap, item.current_cap)
        minimum = item.current_guarantee
        notes.append(Text.of(gettext_noop("not lowered on %(days)s days of data"), days=n_days))
    if capacity is not None:
        max_cap = round_down(max_cap_share * capacity, whole=whole)
        if cap > max_cap:
            notes.append(
                Text.of(
                    gettext_noop(
                        "cap %(cap)s lowered to %(max_cap)s: %(share)s%% of capacity "
                        "%(capacity)s %(unit)s"
                    ),
                    cap=format_amount(cap),
                    max_cap=format_amount(max_cap),
                    share=format_amount(max_cap_share * 100),
                    capacity=format_amount(capacity),
                    unit=unit,
                )
            )
            flags.append(FLAG_SHARE)
            cap = max_cap
    prepared.cap = cap
    prepared.minimum = min(minimum, cap)
    return prepared


def guarantee_step(scale: Decimal, *, whole: bool) -> Decimal:
    """The unit guarantees are chosen in for a resource of ``scale`` (its capacity): one whole
    unit, or for large amounts (MiB of vGPU memory, cores, GiB) a power of ten giving at most
    about a thousand steps of it."""
    if whole and scale <= 4000:
        return Decimal(1)
    exponent = math.floor(math.log10(max(float(scale), 1e-3) / 1000))
    step = Decimal(10) ** exponent
    return max(step, Decimal(1) if whole else AMOUNT_PLACES)


def _step(item: AllocationUsage, capacity: Decimal | None) -> Decimal:
    scale = capacity if capacity is not None else max(item.current_cap, Decimal(1))
    return guarantee_step(scale, whole=item.whole_units)


def _amount(value: float, *, places: Decimal = AMOUNT_PLACES) -> Decimal:
    return Decimal(str(value)).quantize(places)


def _signed(value: Decimal) -> str:
    return ("+" if value > 0 else "") + format_amount(value)


def _percent(share: float | None, *, places: Decimal = Decimal(1)) -> str:
    return format_amount(_amount((share or 0.0) * 100, places=places))


def _finish(
    p: _Prepared, guarantee: Decimal, *, prices: Prices, held: bool, cluster: str
) -> Proposal:
    """The proposal of a prepared allocation once its guarantee is chosen, with its words."""
    item, figures, notes, flags, unit = p.item, p.figures, p.notes, p.flags, p.unit
    whole = item.whole_units
    cap = p.cap
    borrowed_price = prices.borrowed_for(item.workload_class)
    assert p.actual is not None and p.forecast is not None
    g, c = float(guarantee), float(cap)
    expected = outcome(p.forecast.distribution, g, c)
    last = outcome(p.actual, g, c)
    cost = expected.cost(prices, item.workload_class)
    figures.update(
        {
            "expected_covered_share": _percent(expected.covered_share),
            "expected_idle_share": _percent(expected.idle_share),
            "expected_blocked_share": _percent(expected.blocked_share),
            "expected_cost": format_amount(_amount(cost, places=TENTH)),
            "prices": Text.of(
                gettext_noop(
                    "per unit-hour: idle guaranteed %(idle)s, borrowed %(borrowed)s, "
                    "blocked %(blocked)s"
                ),
                idle=format_amount(prices.idle),
                borrowed=format_amount(borrowed_price),
                blocked=format_amount(prices.blocked),
            ),
        }
    )
    figures["basis"] = Text.of(
        gettext_noop(
            "guarantee: the least expected cost next month (an idle guaranteed %(unit)s-hour "
            "costs %(idle)s, a borrowed one %(borrowed)s); cap: highest forecast demand "
            "%(peak)s × %(headroom)s"
        ),
        unit=unit,
        idle=format_amount(prices.idle),
        borrowed=format_amount(borrowed_price),
        peak=format_amount(_amount(p.forecast.distribution.peak)),
        headroom=format_amount(Decimal(str(CAP_HEADROOM))),
    )
    # What it rests on, in a lead's words: last month under the suggested values.
    days_total = max(p.data_days, p.busy_days, 1)
    if guarantee > 0:
        rests_on = Text.of(
            gettext_noop(
                "busy %(busy)s of %(days)s days; at %(guarantee)s guaranteed %(unit)s, "
                "%(covered)s%% of last month's demand would have been covered and %(idle)s%% "
                "of the guarantee idle"
            ),
            busy=p.busy_days,
            days=days_total,
            guarantee=format_amount(guarantee),
            unit=unit,
            covered=_percent(last.covered_share),
            idle=_percent(last.idle_share),
        )
    else:
        rests_on = Text.of(
            gettext_noop(
                "busy %(busy)s of %(days)s days; with no guarantee all of last month's demand "
                "would have borrowed (%(hours)s %(unit)s-hours)"
            ),
            busy=p.busy_days,
            days=days_total,
            hours=_hours(_amount(last.demand)),
            unit=unit,
        )
    notes.insert(0, rests_on)
    if last.blocked_share and last.blocked_share >= 0.0005:
        notes.append(
            Text.of(
                gettext_noop("%(blocked)s%% of last month's demand is above the cap %(cap)s"),
                blocked=_percent(last.blocked_share, places=TENTH),
                cap=format_amount(cap),
            )
        )
    if held:
        flags.append(FLAG_SCALED)
        where = Text.of(gettext_noop("on %(cluster)s"), cluster=cluster) if cluster else ""
        notes.append(
            Text.of(
                gettext_noop(
                    "guarantee held to %(guarantee)s by capacity %(where)s: each further "
                    "%(unit)s saves more elsewhere"
                ),
                guarantee=format_amount(guarantee),
                where=where,
                unit=unit,
            )
        )
    floor_units = round_up(p.floor, whole=whole)
    if guarantee < p.floor and floor_units <= cap:
        at_floor = outcome(p.forecast.distribution, float(floor_units), c)
        flags.append(FLAG_BELOW_FLOOR)
        notes.append(
            Text.of(
                gettext_noop(
                    "guarantee %(guarantee)s is below 80%% of the typical daily peak "
                    "(%(floor)s); the seed's floor of %(floor_units)s would add %(idle)s idle "
                    "guaranteed %(unit)s-hours next month and save %(borrowed)s borrowed ones "
                    "(expected cost %(cost)s instead of %(ours)s)"
                ),
                guarantee=format_amount(guarantee),
                floor=format_amount(p.floor.quantize(AMOUNT_PLACES)),
                floor_units=format_amount(floor_units),
                idle=_hours(_amount(at_floor.idle - expected.idle)),
                unit=unit,
                borrowed=_hours(_amount(expected.borrowed - at_floor.borrowed)),
                cost=format_amount(
                    _amount(at_floor.cost(prices, item.workload_class), places=TENTH)
                ),
                ours=format_amount(_amount(cost, places=TENTH)),
            )
        )
    elif guarantee < p.floor:
        flags.append(FLAG_BELOW_FLOOR)
        notes.append(
            Text.of(
                gettext_noop(
                    "guarantee %(guarantee)s is below 80%% of the typical daily peak "
                    "(%(floor)s): the cluster's cap share allows no more"
                ),
                guarantee=format_amount(guarantee),
                floor=format_amount(p.floor.quantize(AMOUNT_PLACES)),
            )
        )
    idle = item.current_guarantee - round_up(p.demand_max, whole=whole)
    if item.current_guarantee > 0 and idle > 0:
        flags.append(FLAG_IDLE)
        notes.append(
            Text.of(
                gettext_noop(
                    "%(idle)s of %(guarantee)s guaranteed %(unit)s never used this month "
                    "(highest daily demand %(demand)s); %(idle_hours)s idle guaranteed "
                    "%(unit)s-hours"
                ),
                idle=format_amount(idle),
                guarantee=format_amount(item.current_guarantee),
                unit=unit,
                demand=format_amount(p.demand_max),
                idle_hours=_hours(
                    _amount(
                        outcome(
                            p.actual, float(item.current_guarantee), float(item.current_cap)
                        ).idle
                    )
                ),
            )
        )
    utilization = figures.get("utilization_mean")
    if utilization is not None and Decimal(utilization) < LOW_UTILIZATION and p.demand_max > 0:
        flags.append(FLAG_LOW_UTILIZATION)
        notes.append(
            Text.of(
                gettext_noop("mean GPU utilization %(utilization)s%% (below %(low)s%%)"),
                utilization=utilization,
                low=format_amount(LOW_UTILIZATION),
            )
        )
    return Proposal(
        namespace=item.namespace,
        resource=item.resource,
        current_guarantee=item.current_guarantee,
        current_cap=item.current_cap,
        guarantee=guarantee,
        cap=cap,
        confidence=p.confidence,
        figures=figures,
        notes=tuple(notes),
        flags=tuple(flags),
        whole_units=whole,
        floor=p.floor,
    )


def _kept(p: _Prepared) -> Proposal:
    item = p.item
    return Proposal(
        namespace=item.namespace,
        resource=item.resource,
        current_guarantee=item.current_guarantee,
        current_cap=item.current_cap,
        guarantee=item.current_guarantee,
        cap=item.current_cap,
        confidence=p.confidence,
        figures=p.figures,
        notes=tuple(p.notes),
        flags=tuple(p.flags),
        whole_units=item.whole_units,
    )


def suggest_allocation(
    item: AllocationUsage,
    *,
    period: Period,
    capacity: Decimal | None,
    max_cap_share: Decimal,
    prices: Prices = DEFAULT_PRICES,
) -> Proposal:
    """The suggestion of one allocation alone (its guarantee bounded by ``capacity`` only)."""
    return suggest_cluster(
        [item],
        period=period,
        capacities={} if capacity is None else {item.resource: capacity},
        max_cap_share=max_cap_share,
        prices=prices,
        share_capacity=capacity,
    )[0]


# --------------------------------------------------------------------------------------------
# A whole cluster


def suggest_cluster(
    items: Iterable[AllocationUsage],
    *,
    period: Period,
    capacities: dict[str, Decimal],
    max_cap_share: Decimal,
    cluster: str = "",
    prices: Prices = DEFAULT_PRICES,
    share_capacity: Decimal | None = None,
) -> list[Proposal]:
    """Suggestions of every allocation of a cluster. Caps first, each from its own forecast;
    then per resource every guarantee together (usage/forecast.allocate_guarantees): the next
    unit goes where it saves the most expected cost, within the capacity left by allocations
    without data (kept as they are). Order is kept."""
    items = list(items)
    prepared = [
        _prepare(
            item,
            period=period,
            capacity=capacities.get(item.resource, share_capacity),
            max_cap_share=max_cap_share,
        )
        for item in items
    ]
    by_resource: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(prepared):
        by_resource[p.item.resource].append(i)
    proposals: list[Proposal | None] = [None] * len(prepared)
    for resource, indexes in by_resource.items():
        capacity = capacities.get(resource)
        fixed = [i for i in indexes if prepared[i].fixed]
        free = [i for i in indexes if not prepared[i].fixed]
        for i in fixed:
            proposals[i] = _kept(prepared[i])
        if not free:
            continue
        step = _step(prepared[free[0]].item, capacity)
        left = None
        if capacity is not None:
            left = float(capacity - sum((prepared[i].item.current_guarantee for i in fixed), ZERO))
        candidates = [
            Candidate(
                key=str(i),
                distribution=prepared[i].forecast.distribution,
                cap=float(prepared[i].cap),
                borrowed_price=float(prices.borrowed_for(prepared[i].item.workload_class)),
                minimum=float(prepared[i].minimum),
            )
            for i in free
        ]
        chosen = allocate_guarantees(
            candidates, capacity=left, step=float(step), idle_price=float(prices.idle)
        )
        alone = (
            allocate_guarantees(
                candidates, capacity=None, step=float(step), idle_price=float(prices.idle)
            )
            if left is not None
            else chosen
        )
        for i in free:
            whole = prepared[i].item.whole_units
            guarantee = as_decimal(chosen[str(i)], whole=whole)
            held = chosen[str(i)] + 1e-9 < alone[str(i)]
            proposals[i] = _finish(
                prepared[i], guarantee, prices=prices, held=held, cluster=cluster
            )
    return [p for p in proposals if p is not None]
