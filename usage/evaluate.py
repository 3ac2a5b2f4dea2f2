"""How good are suggestions? The portal's method against simple policies and against the best
plan in hindsight, each scored on the demand that followed. Pure functions (no database):
``usage/backtest.py`` feeds them a cluster's months, ``evaluate_suggestions`` the trace.

Policies, each from the same period of usage (before the scored period), all under the same
rules (cap within the cluster's share of capacity, guarantees within capacity):

- **suggested**: ``usage/suggest.py``, the method itself, under the cluster's prices.
- **equal split**: every namespace is guaranteed capacity / namespaces (rounded down), capped at
  the cluster's max share of capacity.
- **seed rule**, as the seed document says and an admin would apply it by hand: guarantee 80% of
  the typical daily peak (p95 of the daily peaks of demand, rounded up), cap the highest daily
  peak; guarantees scaled proportionally to fit capacity (largest remainder). A namespace with
  no data keeps its values.
- **best in hindsight**: the plan of least cost on the scored period itself
  (:func:`plan_hindsight`), found by the same code as the method's guarantees
  (``usage/forecast.allocate_guarantees``): what no method that only sees the past can beat, so
  the distance to it is what is left to gain.

Scores over the scored period (``usage/forecast.outcome``), from its demand (allocated + pending
at each 5-minute sample, in unit-hours, over the hours the samples stand for):

- **covered**: demand up to the guarantee (served without borrowing);
- **borrowed**: demand above the guarantee within the cap (may wait or be preempted);
- **blocked**: demand above the cap (cannot run at all);
- **idle guaranteed**: guarantee nothing ran on (promised, so nobody else can be promised it);
- **cost**: the three priced as the suggestions price them (``usage/forecast.Prices``, the
  cluster's): the one number the method minimises, lower is better.

A namespace without samples in the scored period is not scored (no hours to count).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from decimal import Decimal

from quotas.rules import PEAK_SHARE
from usage.forecast import Candidate, Distribution, Prices, allocate_guarantees, as_decimal, outcome
from usage.stats import percentile
from usage.suggest import (
    TYPICAL_PEAK_PERCENTILE,
    AllocationUsage,
    Period,
    guarantee_step,
    round_down,
    round_up,
    suggest_cluster,
)

ZERO = Decimal(0)

# Policy codes, as SuggestionBacktest stores them; the command's tables name them in English.
SUGGESTED = "suggested"
EQUAL_SPLIT = "equal_split"
SEED_RULE = "seed_rule"
HINDSIGHT = "hindsight"
POLICIES = (SUGGESTED, EQUAL_SPLIT, SEED_RULE, HINDSIGHT)
POLICY_NAMES = {
    SUGGESTED: "suggested",
    EQUAL_SPLIT: "equal split",
    SEED_RULE: "seed rule",
    HINDSIGHT: "best in hindsight",
}


@dataclass(frozen=True)
class Plan:
    guarantee: Decimal
    cap: Decimal


NO_PLAN = Plan(ZERO, ZERO)


@dataclass
class Score:
    """Unit-hours of a policy over the scored period, summed over namespaces, and their cost."""

    demand: float = 0.0
    covered: float = 0.0
    borrowed: float = 0.0
    blocked: float = 0.0
    idle: float = 0.0
    guaranteed: float = 0.0
    cost: float = 0.0
    namespaces: int = 0

    @property
    def covered_share(self) -> float | None:
        return self.covered / self.demand if self.demand else None

    @property
    def blocked_share(self) -> float | None:
        return self.blocked / self.demand if self.demand else None

    @property
    def idle_share(self) -> float | None:
        return self.idle / self.guaranteed if self.guaranteed else None

    def add(self, other: Score) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


# --------------------------------------------------------------------------------------------
# Rules every policy obeys


def _max_cap(capacity: Decimal, share: Decimal, *, whole: bool) -> Decimal:
    return round_down(share * capacity, whole=whole)


def _decimal(value: float) -> Decimal:
    """A float demand as a Decimal, without the float's last-digit noise (0.30000000000000004)."""
    return Decimal(str(round(value, 9)))


def _whole(items: Sequence[AllocationUsage]) -> bool:
    return all(i.whole_units for i in items)


def fit_to_capacity(
    guarantees: Mapping[str, Decimal], *, capacity: Decimal, whole: bool
) -> dict[str, Decimal]:
    """Guarantees scaled down to fit ``capacity`` when their sum exceeds it, as an admin would
    cut them by hand: each by capacity / sum, rounded down, the units left over one each to the
    largest remainders (ties: the larger guarantee, then the name)."""
    total = sum(guarantees.values(), ZERO)
    if total <= capacity or total == 0:
        return dict(guarantees)
    factor = capacity / total
    raw = {ns: g * factor for ns, g in guarantees.items()}
    scaled = {ns: round_down(r, whole=whole) for ns, r in raw.items()}
    if whole:
        left = int(round_down(capacity, whole=True) - sum(scaled.values(), ZERO))
        order = sorted(guarantees, key=lambda ns: (-(raw[ns] - scaled[ns]), -guarantees[ns], ns))
        for ns in order[: max(left, 0)]:
            scaled[ns] += 1
    return scaled


# --------------------------------------------------------------------------------------------
# The policies


def plan_equal_split(
    items: Sequence[AllocationUsage], *, capacity: Decimal, max_cap_share: Decimal
) -> dict[str, Plan]:
    whole = _whole(items)
    share = round_down(capacity / len(items), whole=whole) if items else ZERO
    cap = _max_cap(capacity, max_cap_share, whole=whole)
    return {i.namespace: Plan(min(share, cap), cap) for i in items}


def _daily_peaks(item: AllocationUsage) -> list[Decimal]:
    """The peak demand of each day: from the 5-minute demand when there is any, else from the
    rollups (peak allocated + peak pending)."""
    if item.demand:
        return [_decimal(d.peak) for d in item.demand]
    return [d.peak + d.pending_peak for d in item.days]


def plan_seed_rule(
    items: Sequence[AllocationUsage], *, capacity: Decimal, max_cap_share: Decimal
) -> dict[str, Plan]:
    whole = _whole(items)
    max_cap = _max_cap(capacity, max_cap_share, whole=whole)
    caps: dict[str, Decimal] = {}
    guarantees: dict[str, Decimal] = {}
    for i in items:
        peaks = _daily_peaks(i)
        if not peaks:
            # No data: left as it is, as by the method.
            caps[i.namespace], guarantees[i.namespace] = i.current_cap, i.current_guarantee
            continue
        cap = min(round_up(max(peaks), whole=whole), max_cap)
        typical = percentile(peaks, TYPICAL_PEAK_PERCENTILE)
        caps[i.namespace] = cap
        guarantees[i.namespace] = min(round_up(PEAK_SHARE * typical, whole=whole), cap)
    fitted = fit_to_capacity(guarantees, capacity=capacity, whole=whole)
    return {ns: Plan(fitted[ns], caps[ns]) for ns in caps}


def plan_suggested(
    items: Sequence[AllocationUsage],
    *,
    capacity: Decimal,
    max_cap_share: Decimal,
    period: Period,
    prices: Prices,
    cluster: str = "",
) -> dict[str, Plan]:
    resource = items[0].resource if items else ""
    proposals = suggest_cluster(
        items,
        period=period,
        capacities={resource: capacity},
        max_cap_share=max_cap_share,
        cluster=cluster,
        prices=prices,
    )
    return {p.namespace: Plan(p.guarantee, p.cap) for p in proposals}


def plan_hindsight(
    demand: Mapping[str, Distribution],
    *,
    capacity: Decimal,
    max_cap_share: Decimal,
    prices: Prices,
    classes: Mapping[str, str] | None = None,
    whole: bool = True,
) -> dict[str, Plan]:
    """The plan of least cost on ``demand`` itself (namespace -> its demand over the scored
    period; ``classes``: namespace -> workload class, for the price of borrowing), under the
    rules every policy obeys (guarantee <= cap <= the share of capacity; guarantees within
    capacity).

    The cap only decides what is blocked: the highest demand, rounded up, within the share.
    The guarantees are chosen together by ``allocate_guarantees``, the code of the method: one
    step at a time to the namespace whose next step saves the most cost, while one still saves
    and capacity is left. The cost is a sum of convex functions, one per namespace, so this is
    optimal; with the caps at the highest demand, as long as a blocked unit-hour costs at least
    what a borrowed one does (the default prices), no plan within the rules costs less."""
    classes = classes or {}
    max_cap = _max_cap(capacity, max_cap_share, whole=whole)
    caps = {
        ns: min(round_up(_decimal(dist.peak), whole=whole), max_cap) for ns, dist in demand.items()
    }
    candidates = [
        Candidate(
            key=ns,
            distribution=dist,
            cap=float(caps[ns]),
            borrowed_price=float(prices.borrowed_for(classes.get(ns, ""))),
        )
        for ns, dist in demand.items()
    ]
    chosen = allocate_guarantees(
        candidates,
        capacity=float(capacity),
        step=float(guarantee_step(capacity, whole=whole)),
        idle_price=float(prices.idle),
    )
    return {ns: Plan(as_decimal(chosen[ns], whole=whole), caps[ns]) for ns in demand}


# --------------------------------------------------------------------------------------------
# Scoring


def score_plan(
    plans: Mapping[str, Plan],
    demand: Mapping[str, Distribution],
    *,
    prices: Prices,
    classes: Mapping[str, str] | None = None,
) -> Score:
    """Score a plan on the demand of every namespace (a namespace the plan leaves out has
    neither guarantee nor cap: all its demand is blocked)."""
    classes = classes or {}
    total = Score()
    for namespace, dist in demand.items():
        plan = plans.get(namespace, NO_PLAN)
        o = outcome(dist, float(plan.guarantee), float(plan.cap))
        total.demand += o.demand
        total.covered += o.covered
        total.borrowed += o.borrowed
        total.blocked += o.blocked
        total.idle += o.idle
        total.guaranteed += o.guaranteed
        total.cost += o.cost(prices, classes.get(namespace, ""))
        total.namespaces += 1
    return total


def score_table(scores: Mapping[str, Score], *, unit: str = "GPU") -> str:
    """A Markdown table of the scores, one row per policy (unit-hours and cost, rounded)."""

    def h(value: float) -> str:
        return f"{value:,.0f}"

    def share(value: float | None) -> str:
        return "-" if value is None else f"{value * 100:.1f}%"

    lines = [
        f"| policy | demand ({unit}-hours) | covered by guarantee | borrowed | blocked by cap "
        "| idle guaranteed | cost |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, s in scores.items():
        lines.append(
            f"| {POLICY_NAMES.get(name, name)} | {h(s.demand)} "
            f"| {h(s.covered)} ({share(s.covered_share)}) | {h(s.borrowed)} "
            f"| {h(s.blocked)} ({share(s.blocked_share)}) "
            f"| {h(s.idle)} ({share(s.idle_share)} of {h(s.guaranteed)}) | {h(s.cost)} |"
        )
    return "\n".join(lines)
