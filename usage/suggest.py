"""Suggestion maths: next month's guarantee and cap of every team namespace and resource, from a
month of daily usage rollups, within the rules of the guarantee + elastic model.

Pure functions from data to data (no database). ``usage/suggestions.py`` feeds them the
rollups and stores what they return. Notes and the "how" figure are :class:`quotas.texts.Text`
(a msgid and its parameters), stored as such and rendered in the reader's language when shown.

How one allocation is suggested (figures from the month's daily rollups; *demand* of a day is
its peak allocated plus its peak pending, so work that waited counts as needed):

- **Typical daily peak** ``P``: the p95 of the daily allocated peaks, exactly what the rules'
  "guarantee below 80% of last month's typical daily peak" warning compares with, so a
  suggestion never triggers that warning. ``floor = 80% of P``.
- **Recent level** ``L``: the median of the daily means of the last 7 days with data.
- **Growth**: weekly means of the daily means (7-day weeks from the start of the month, weeks
  with at least 4 days of data); when each of the last two weeks grew, the last week-over-week
  growth (at most +25%) raises the cap: one week ahead, not a forecast of a month.
- **Guarantee** = max(floor, L), rounded up (whole units for GPU, MIG and vGPU kinds): the
  floor is the least the rules allow, and a namespace whose usage sits above it (steady or
  grown) is guaranteed its recent level. Inference (steady, latency-bound) ends up near its
  peak this way, since its floor is 80% of it and its mean close to it; training (bursty, can
  borrow) at the floor, with a cap near its peak. Neither growth nor the daily p95 raises the
  guarantee: on the openb trace both mostly added idle guaranteed GPU-hours (README,
  "How good are the suggestions").
- **Cap** = max(guarantee, highest daily demand × growth × 1.25), rounded up: room for a day
  above the month's highest, so that nothing needed is cut off.
- **Rules**: cap ≤ the cluster's max share of capacity (rounded down to whole units); guarantee
  ≤ cap. When the guarantees of a cluster and resource add up to more than its capacity, every
  guarantee is scaled by capacity / sum and rounded by largest remainder (:func:`scale_guarantees`);
  each scaled suggestion says so.
- **Data**: with fewer than 7 days of data nothing is lowered below the current values; the
  confidence is ``high`` (a finished month with 21+ days of data), ``medium`` (14+ days, or the
  month not over), ``low`` (fewer than 14 days) or ``none`` (no data: current values kept).
- **Flags**: guaranteed-but-idle units (current guarantee above the month's highest daily
  demand), low mean GPU utilization, and the rule adjustments above.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Protocol

from django.utils.translation import gettext_noop

from common.amounts import UNIT_WORDS, format_amount
from quotas.rules import PEAK_SHARE
from quotas.texts import Text
from usage.stats import percentile

ZERO = Decimal(0)
TYPICAL_PEAK_PERCENTILE = Decimal("0.95")  # as usage.selectors (the rules' warning)
RECENT_DAYS = 7
WEEK_MIN_DAYS = 4
MAX_WEEKLY_GROWTH = Decimal("1.25")
# Below this week-over-week growth usage is flat: noise is no trend (and raises no cap).
MIN_WEEKLY_GROWTH = Decimal("1.05")
CAP_HEADROOM = Decimal("1.25")
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


def weekly_growth(weeks: Sequence[Decimal]) -> Decimal:
    """The last week-over-week growth when each of the last two weeks grew by at least 5%,
    at most +25%; else 1 (flat)."""
    if len(weeks) < 3:
        return Decimal(1)
    a, b, c = weeks[-3], weeks[-2], weeks[-1]
    if a <= 0 or b < a * MIN_WEEKLY_GROWTH or c < b * MIN_WEEKLY_GROWTH:
        return Decimal(1)
    return min(c / b, MAX_WEEKLY_GROWTH)


def recent_level(days: Sequence[DailyUsage]) -> Decimal:
    recent = sorted(days, key=lambda d: d.day)[-RECENT_DAYS:]
    return percentile([d.mean for d in recent], Decimal("0.5"))


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


def suggest_allocation(
    item: AllocationUsage,
    *,
    period: Period,
    capacity: Decimal | None,
    max_cap_share: Decimal,
) -> Proposal:
    """The suggested guarantee and cap of one allocation (before capacity scaling)."""
    whole = item.whole_units
    unit = unit_text(item.unit or item.resource)
    days = [d for d in item.days if period.start <= d.day <= period.end]
    figures = month_figures(days, period)
    confidence, notes, flags = _confidence(len(days), period)
    if not days:
        return Proposal(
            namespace=item.namespace,
            resource=item.resource,
            current_guarantee=item.current_guarantee,
            current_cap=item.current_cap,
            guarantee=item.current_guarantee,
            cap=item.current_cap,
            confidence=confidence,
            figures=figures,
            notes=tuple(notes),
            flags=tuple(flags),
            whole_units=whole,
        )

    typical = typical_daily_peak(days)
    floor = PEAK_SHARE * typical
    demand_max = max(d.peak + d.pending_peak for d in days)
    level = recent_level(days)
    weeks = weekly_means(days, period.start)
    growth = weekly_growth(weeks)
    figures.update(
        {
            "floor": format_amount(floor.quantize(AMOUNT_PLACES)),
            "recent_level": format_amount(level.quantize(AMOUNT_PLACES)),
            "weekly_means": [format_amount(w.quantize(AMOUNT_PLACES)) for w in weeks],
            "growth_per_week": _ratio(growth),
        }
    )
    if growth > 1:
        flags.append(FLAG_GROWING)
        notes.append(
            Text.of(
                gettext_noop(
                    "growing week over week (%(weeks)s mean %(unit)s): cap raised ×%(growth)s"
                ),
                weeks=" → ".join(format_amount(w.quantize(AMOUNT_PLACES)) for w in weeks[-3:]),
                unit=unit,
                growth=_ratio(growth),
            )
        )

    guarantee = round_up(max(floor, level), whole=whole)
    cap = round_up(max(guarantee, demand_max * growth * CAP_HEADROOM), whole=whole)
    basis = gettext_noop(
        "guarantee = max(80%% of typical daily peak %(typical)s, recent mean %(level)s); "
        "cap = highest daily demand %(demand)s × %(headroom)s"
    )
    if growth > 1:
        basis = gettext_noop(
            "guarantee = max(80%% of typical daily peak %(typical)s, recent mean %(level)s); "
            "cap = highest daily demand %(demand)s × %(headroom)s × growth %(growth)s"
        )
    figures["basis"] = Text.of(
        basis,
        typical=format_amount(typical),
        level=format_amount(level),
        demand=format_amount(demand_max),
        headroom=format_amount(CAP_HEADROOM),
        growth=_ratio(growth),
    )

    if len(days) < THIN_DAYS and (guarantee < item.current_guarantee or cap < item.current_cap):
        guarantee = max(guarantee, item.current_guarantee)
        cap = max(cap, item.current_cap)
        notes.append(Text.of(gettext_noop("not lowered on %(days)s days of data"), days=len(days)))

    if demand_max == 0:
        notes.append(
            Text.of(
                gettext_noop("nothing used all month: guarantee released, cap kept for borrowing")
            )
        )
        cap = max(cap, item.current_cap)

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
        if guarantee > cap:
            guarantee = cap

    if guarantee < floor:
        flags.append(FLAG_BELOW_FLOOR)
        notes.append(
            Text.of(
                gettext_noop(
                    "guarantee %(guarantee)s is below 80%% of the typical daily peak "
                    "(%(floor)s): the cluster's cap share allows no more"
                ),
                guarantee=format_amount(guarantee),
                floor=format_amount(floor.quantize(AMOUNT_PLACES)),
            )
        )

    idle = item.current_guarantee - round_up(demand_max, whole=whole)
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
                demand=format_amount(demand_max),
                idle_hours=figures["idle_guaranteed_gpu_hours"],
            )
        )
    utilization = figures.get("utilization_mean")
    if utilization is not None and Decimal(utilization) < LOW_UTILIZATION and demand_max > 0:
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
        confidence=confidence,
        figures=figures,
        notes=tuple(notes),
        flags=tuple(flags),
        whole_units=whole,
        floor=floor,
    )


# --------------------------------------------------------------------------------------------
# A whole cluster


def scale_guarantees(
    proposals: Sequence[Proposal], *, capacity: Decimal, cluster: str = ""
) -> list[Proposal]:
    """Guarantees of one cluster and resource, scaled down to fit ``capacity`` when their sum
    exceeds it: each is multiplied by capacity / sum (the same share for everybody), rounded
    down, and the units left over go one each to the largest remainders (ties: the larger
    guarantee, then the namespace name). Order is kept."""
    total = sum((p.guarantee for p in proposals), ZERO)
    if total <= capacity or total == 0:
        return list(proposals)
    factor = capacity / total
    raw = [p.guarantee * factor for p in proposals]
    scaled = [round_down(r, whole=p.whole_units) for r, p in zip(raw, proposals, strict=True)]
    if all(p.whole_units for p in proposals):
        left = int(round_down(capacity, whole=True) - sum(scaled, ZERO))
        order = sorted(
            range(len(proposals)),
            key=lambda i: (-(raw[i] - scaled[i]), -proposals[i].guarantee, proposals[i].namespace),
        )
        for i in order[: max(left, 0)]:
            scaled[i] += 1
    out = []
    for proposal, new in zip(proposals, scaled, strict=True):
        if new == proposal.guarantee:
            out.append(proposal)
            continue
        params = {
            "before": format_amount(proposal.guarantee),
            "after": format_amount(new),
            "total": format_amount(total),
            "resource": proposal.resource,
            "capacity": format_amount(capacity),
            "factor": _ratio(factor),
        }
        if cluster:
            note = Text.of(
                gettext_noop(
                    "guarantee scaled down from %(before)s to %(after)s: suggested guarantees "
                    "on %(cluster)s sum to %(total)s %(resource)s, above capacity %(capacity)s; "
                    "each scaled by %(capacity)s/%(total)s (×%(factor)s) and rounded by largest "
                    "remainder"
                ),
                cluster=cluster,
                **params,
            )
        else:
            note = Text.of(
                gettext_noop(
                    "guarantee scaled down from %(before)s to %(after)s: suggested guarantees "
                    "sum to %(total)s %(resource)s, above capacity %(capacity)s; each scaled by "
                    "%(capacity)s/%(total)s (×%(factor)s) and rounded by largest remainder"
                ),
                **params,
            )
        flags = [*proposal.flags, FLAG_SCALED]
        if new < proposal.floor and FLAG_BELOW_FLOOR not in flags:
            flags.append(FLAG_BELOW_FLOOR)
        figures = {**proposal.figures, "unscaled_guarantee": format_amount(proposal.guarantee)}
        out.append(
            replace(
                proposal,
                guarantee=new,
                notes=(*proposal.notes, note),
                flags=tuple(flags),
                figures=figures,
            )
        )
    return out


def suggest_cluster(
    items: Iterable[AllocationUsage],
    *,
    period: Period,
    capacities: dict[str, Decimal],
    max_cap_share: Decimal,
    cluster: str = "",
) -> list[Proposal]:
    """Suggestions of every allocation of a cluster, guarantees scaled per resource to fit."""
    proposals = [
        suggest_allocation(
            item, period=period, capacity=capacities.get(item.resource), max_cap_share=max_cap_share
        )
        for item in items
    ]
    by_resource: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(proposals):
        by_resource[p.resource].append(i)
    for resource, indexes in by_resource.items():
        capacity = capacities.get(resource)
        if capacity is None:
            continue
        scaled = scale_guarantees(
            [proposals[i] for i in indexes], capacity=capacity, cluster=cluster
        )
        for i, p in zip(indexes, scaled, strict=True):
            proposals[i] = p
    return proposals
