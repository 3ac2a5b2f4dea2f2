"""How good are suggestions? The portal's method against two simple policies, scored on the
usage that followed. Pure functions (no Django); ``evaluate_suggestions`` feeds them the trace.

Policies, each from the same days of daily rollups (before the scored period):

- **equal split**: every namespace is guaranteed capacity / namespaces (rounded down), capped at
  the cluster's max share of capacity.
- **seed rule**, as the seed document says and an admin would apply it by hand: guarantee 80% of
  the typical daily peak (p95 of the daily peaks, rounded up), cap the highest daily peak.
- **suggested**: ``usage/suggest.py``.
- **best in hindsight**: the plan with the lowest mismatch on the scored period itself, under the
  same rules (:func:`plan_hindsight`): what no method that only sees the past can beat, so the
  distance to it is what is left to gain.

Every policy obeys the same rules (cap within the share, guarantees scaled to fit capacity the
same way), so the scores compare the methods, not who broke a rule.

Scores over the following period, from its 5-minute samples, *demand* being allocated plus
pending units at each sample (in unit-hours):

- **covered**: demand up to the guarantee (served without borrowing);
- **uncovered**: demand above the guarantee (must borrow; may wait or be preempted);
- **idle guaranteed**: guarantee not used (promised, so nobody else can be promised it);
- **cut off**: demand above the cap (cannot run at all);
- **mismatch** = uncovered + idle guaranteed + cut off: what the brief asks for in one number
  (demand covered as much as possible, as little guarantee idle, nothing cut off; cut-off
  demand counts twice, as uncovered and as cut off). Lower is better.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from usage.suggest import (
    PEAK_SHARE,
    AllocationUsage,
    Period,
    Proposal,
    round_down,
    round_up,
    scale_guarantees,
    suggest_cluster,
    typical_daily_peak,
)

ZERO = Decimal(0)
POLICIES = ("equal split", "seed rule", "suggested", "best in hindsight")


@dataclass(frozen=True)
class Plan:
    guarantee: Decimal
    cap: Decimal


@dataclass
class Score:
    demand: Decimal = ZERO
    covered: Decimal = ZERO
    idle: Decimal = ZERO
    cut_off: Decimal = ZERO
    guaranteed: Decimal = ZERO

    @property
    def uncovered(self) -> Decimal:
        return self.demand - self.covered

    @property
    def mismatch(self) -> Decimal:
        return self.uncovered + self.idle + self.cut_off

    @property
    def covered_share(self) -> Decimal:
        return self.covered / self.demand if self.demand else ZERO

    def add(self, other: Score) -> None:
        self.demand += other.demand
        self.covered += other.covered
        self.idle += other.idle
        self.cut_off += other.cut_off
        self.guaranteed += other.guaranteed


def _max_cap(capacity: Decimal, share: Decimal) -> Decimal:
    return round_down(share * capacity, whole=True)


def _fit(plans: dict[str, Plan], *, capacity: Decimal, resource: str) -> dict[str, Plan]:
    """The same capacity scaling as the suggestions (proportional, largest remainder)."""
    proposals = [
        Proposal(
            namespace=ns,
            resource=resource,
            current_guarantee=ZERO,
            current_cap=ZERO,
            guarantee=p.guarantee,
            cap=p.cap,
            confidence="",
        )
        for ns, p in plans.items()
    ]
    return {
        p.namespace: Plan(p.guarantee, p.cap)
        for p in scale_guarantees(proposals, capacity=capacity)
    }


def plan_equal_split(
    items: Sequence[AllocationUsage], *, capacity: Decimal, max_cap_share: Decimal
) -> dict[str, Plan]:
    share = round_down(capacity / len(items), whole=True) if items else ZERO
    cap = _max_cap(capacity, max_cap_share)
    return {i.namespace: Plan(min(share, cap), cap) for i in items}


def plan_seed_rule(
    items: Sequence[AllocationUsage], *, capacity: Decimal, max_cap_share: Decimal
) -> dict[str, Plan]:
    max_cap = _max_cap(capacity, max_cap_share)
    plans = {}
    for i in items:
        if not i.days:
            plans[i.namespace] = Plan(ZERO, ZERO)
            continue
        cap = min(round_up(max(d.peak for d in i.days), whole=True), max_cap)
        guarantee = min(round_up(PEAK_SHARE * typical_daily_peak(i.days), whole=True), cap)
        plans[i.namespace] = Plan(guarantee, cap)
    resource = items[0].resource if items else ""
    return _fit(plans, capacity=capacity, resource=resource)


def plan_suggested(
    items: Sequence[AllocationUsage],
    *,
    capacity: Decimal,
    max_cap_share: Decimal,
    period: Period,
) -> dict[str, Plan]:
    resource = items[0].resource if items else ""
    proposals = suggest_cluster(
        items, period=period, capacities={resource: capacity}, max_cap_share=max_cap_share
    )
    return {p.namespace: Plan(p.guarantee, p.cap) for p in proposals}


def unit_gains(values: Sequence[Decimal], units: int) -> list[Decimal]:
    """What the k-th guaranteed unit (k = 1..units) takes off the mismatch over ``values``
    (demand at each sample): it covers ``clamp(x - (k - 1), 0, 1)`` of each sample's demand and
    leaves the rest of itself idle, so it gains twice what it covers minus one per sample. The
    gains never grow with k (the mismatch is convex in the guarantee)."""
    ordered = sorted(values)
    n = len(ordered)
    gains = []
    for k in range(1, units + 1):
        # Samples at or above k are covered whole by unit k; those between k - 1 and k in part.
        full = n - bisect_left(ordered, Decimal(k))
        part = sum(
            (x - (k - 1) for x in ordered[bisect_left(ordered, Decimal(k - 1)) : n - full]),
            ZERO,
        )
        covered = full + part
        gains.append(2 * covered - n)
    return gains


def plan_hindsight(
    demand: Mapping[str, Sequence[Decimal]], *, capacity: Decimal, max_cap_share: Decimal
) -> dict[str, Plan]:
    """The plan of least mismatch on ``demand`` itself, in whole units, under the rules every
    policy obeys (guarantee <= cap <= the share of capacity; guarantees within capacity).

    The cap only decides what is cut off: the highest demand, rounded up, within the share.
    The guarantees are chosen together: one unit at a time, the next goes to the namespace whose
    next unit takes most off the mismatch, while one still gains and capacity is left. The
    mismatch is a sum of convex functions, one per namespace, so this greedy choice is optimal
    (ties: the namespace name)."""
    max_cap = _max_cap(capacity, max_cap_share)
    caps = {
        ns: min(round_up(max(values), whole=True), max_cap) if values else ZERO
        for ns, values in demand.items()
    }
    gains = {ns: unit_gains(values, int(caps[ns])) for ns, values in demand.items()}
    guarantees = dict.fromkeys(demand, 0)
    heap = [(-g[0], ns) for ns, g in gains.items() if g]
    heapq.heapify(heap)
    left = int(round_down(capacity, whole=True))
    while heap and left > 0:
        negative_gain, ns = heapq.heappop(heap)
        if -negative_gain <= 0:
            break
        guarantees[ns] += 1
        left -= 1
        if guarantees[ns] < len(gains[ns]):
            heapq.heappush(heap, (-gains[ns][guarantees[ns]], ns))
    return {ns: Plan(Decimal(guarantees[ns]), caps[ns]) for ns in demand}


def score_plan(
    plans: Mapping[str, Plan], demand: Mapping[str, Iterable[Decimal]], *, hours_per_sample: Decimal
) -> Score:
    """Score a plan on the demand (units at each sample) of every namespace."""
    total = Score()
    for namespace, values in demand.items():
        plan = plans.get(namespace, Plan(ZERO, ZERO))
        for x in values:
            total.demand += x * hours_per_sample
            total.covered += min(x, plan.guarantee) * hours_per_sample
            total.idle += max(plan.guarantee - x, ZERO) * hours_per_sample
            total.cut_off += max(x - plan.cap, ZERO) * hours_per_sample
            total.guaranteed += plan.guarantee * hours_per_sample
    return total


def score_table(scores: Mapping[str, Score]) -> str:
    """A Markdown table of the scores, one row per policy (GPU-hours, rounded)."""

    def h(value: Decimal) -> str:
        return f"{value:,.0f}"

    lines = [
        "| policy | demand | covered by guarantee | uncovered | idle guaranteed | cut off by cap "
        "| mismatch |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, s in scores.items():
        lines.append(
            f"| {name} | {h(s.demand)} | {h(s.covered)} ({s.covered_share * 100:.1f}%) "
            f"| {h(s.uncovered)} | {h(s.idle)} | {h(s.cut_off)} | {h(s.mismatch)} |"
        )
    return "\n".join(lines)
