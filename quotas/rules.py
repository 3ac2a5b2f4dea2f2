"""Rules of the guarantee + elastic model: check a proposed change, or the plan as it stands.

Pure functions from frozen dataclasses to a sorted list of :class:`Finding` (no ORM, no I/O).
Errors block a change; warnings are shown and recorded.

Scheduler backends add no rules of their own, because every queue object is rendered from the same
guarantee and cap (see ``quotas/kube/render.py``):

- Volcano: deserved = guarantee and capability = cap, so "capability ≥ deserved ≥ guarantee" is
  exactly "guarantee ≤ cap".
- Kueue: nominalQuota = guarantee and borrowingLimit = cap - guarantee, so "nominalQuota +
  borrowingLimit = cap" always holds, and borrowingLimit ≥ 0 is again "guarantee ≤ cap".
- YuniKorn: guaranteed = guarantee and max = cap, the same inequality.
- "ResourceQuota ≥ queue cap": the namespace ResourceQuota and the queue cap are both the cap.

So the backends only change the wording of the guarantee ≤ cap error (what would break where).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from decimal import ROUND_HALF_UP, Decimal

from common.amounts import format_amount

ERROR = "error"
WARNING = "warning"

# Rule ids: stable, other code and stored audit rows refer to them. Listed in display order.
RULE_NEGATIVE = "negative"
RULE_WHOLE_UNITS = "whole_units"
RULE_PER_POD_MAX_POSITIVE = "per_pod_max_positive"
RULE_UNKNOWN_CAPACITY = "unknown_capacity"
RULE_GUARANTEE_LE_CAP = "guarantee_le_cap"
RULE_PER_POD_MAX_LE_CAP = "per_pod_max_le_cap"
RULE_GUARANTEES_LE_CAPACITY = "guarantees_le_capacity"
RULE_CAP_LE_SHARE = "cap_le_share"
RULE_GUARANTEE_BELOW_PEAK = "guarantee_below_peak"
RULE_LARGE_JUMP = "large_jump"
RULES = (
    RULE_NEGATIVE,
    RULE_WHOLE_UNITS,
    RULE_PER_POD_MAX_POSITIVE,
    RULE_UNKNOWN_CAPACITY,
    RULE_GUARANTEE_LE_CAP,
    RULE_PER_POD_MAX_LE_CAP,
    RULE_GUARANTEES_LE_CAPACITY,
    RULE_CAP_LE_SHARE,
    RULE_GUARANTEE_BELOW_PEAK,
    RULE_LARGE_JUMP,
)

ZERO = Decimal(0)
# A guarantee below this share of last month's typical daily peak is flagged.
PEAK_SHARE = Decimal("0.8")
# An increase by more than this share of cluster capacity is a large jump, whatever the factor.
JUMP_CAPACITY_SHARE = Decimal("0.25")

# What a guarantee above the cap would break on each scheduler backend.
_BACKEND_GUARANTEE_LE_CAP = {
    "volcano": "Volcano: capability must be ≥ deserved",
    "kueue": "Kueue: borrowingLimit = cap - guarantee would be {borrowing}",
    "yunikorn": "YuniKorn: max must be ≥ guaranteed",
}


@dataclass(frozen=True)
class ClusterFacts:
    name: str
    capacities: dict[str, Decimal]  # resource name -> capacity
    max_cap_share: Decimal
    backends: frozenset[str] = frozenset()
    # Resources counted in whole units (GPUs, MIG slices, HAMi vGPU memory and cores).
    whole_resources: frozenset[str] = frozenset()


@dataclass(frozen=True)
class AllocationFacts:
    """One allocation as it stands (or as it will stand once approved changes are applied)."""

    cluster: str
    namespace: str
    resource: str
    guarantee: Decimal
    cap: Decimal
    per_pod_max: Decimal | None = None
    workload_class: str = ""
    unit: str = ""


@dataclass(frozen=True)
class PlanChange:
    """A proposed new value for one allocation; ``current`` is what it is now (None: new)."""

    cluster: str
    namespace: str
    resource: str
    guarantee: Decimal
    cap: Decimal
    per_pod_max: Decimal | None = None
    current: AllocationFacts | None = None


@dataclass(frozen=True)
class UsageFacts:
    """Last month's typical daily peak (e.g. the p95 of daily peaks) of one allocation."""

    cluster: str
    namespace: str
    resource: str
    typical_daily_peak: Decimal


@dataclass(frozen=True)
class Finding:
    level: str  # ERROR or WARNING
    rule: str  # one of RULES
    field: str  # "guarantee", "cap", "per_pod_max" or "resource"
    message: str
    cluster: str
    namespace: str  # "" for findings about a whole cluster and resource
    resource: str

    @property
    def is_error(self) -> bool:
        return self.level == ERROR


def whole_number_error(field: str, value: Decimal | None, resource: str) -> str | None:
    """The message when an amount of a whole-unit resource has a fraction, else None."""
    if value is None or value == value.to_integral_value():
        return None
    return f"{field} must be a whole number of {resource}, got {format_amount(value)}"


def has_errors(findings: Iterable[Finding]) -> bool:
    return any(f.is_error for f in findings)


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Errors first, then by namespace (cluster-wide first), resource, rule order, field."""
    return sorted(
        findings,
        key=lambda f: (
            f.level != ERROR,
            f.cluster,
            f.namespace,
            f.resource,
            RULES.index(f.rule) if f.rule in RULES else len(RULES),
            f.field,
            f.message,
        ),
    )


def check_change(
    *,
    cluster: ClusterFacts,
    allocations: Sequence[AllocationFacts],
    changes: Sequence[PlanChange],
    usage: Iterable[UsageFacts] = (),
    jump_factor: Decimal = Decimal(2),
) -> list[Finding]:
    """Findings for the plan after ``changes`` are applied on top of ``allocations``.

    ``allocations`` is the cluster's plan before the change, one entry per namespace and
    resource (a later entry replaces an earlier one, so approved-but-not-applied values and
    active temporary grants can follow the stored rows). It may leave out the changed
    allocations: their ``current`` then stands in for them. Entries of other clusters are ignored.

    Findings are about the changed allocations only, except the capacity sum, which is about
    each changed cluster and resource. A change never fails a rule it does not make worse: a
    capacity sum already above capacity, or a cap already above the share, blocks only when the
    change raises it (otherwise it is reported as a warning).
    """
    for change in changes:
        if change.cluster != cluster.name:
            raise ValueError(f"change for cluster {change.cluster} checked against {cluster.name}")
    before = _plan_of(cluster, allocations)
    for change in changes:
        key = (change.namespace, change.resource)
        if key not in before and change.current is not None:
            before[key] = change.current
    after = dict(before)
    baselines: dict[tuple[str, str], AllocationFacts | None] = {}
    for change in changes:
        key = (change.namespace, change.resource)
        baselines[key] = change.current if change.current is not None else before.get(key)
        after[key] = _applied(cluster, change, before.get(key))

    peaks = _peaks_of(cluster, usage)
    findings: list[Finding] = []
    for key, baseline in baselines.items():
        allocation = after[key]
        findings += _allocation_findings(
            cluster, allocation, baseline=baseline, peak=peaks.get(key)
        )
        findings += _jump_findings(cluster, allocation, baseline, jump_factor=jump_factor)
    for resource in sorted({resource for _, resource in baselines}):
        findings += _capacity_sum_change(cluster, resource, before.values(), after.values())
    return sort_findings(findings)


def check_plan(
    *,
    cluster: ClusterFacts,
    allocations: Sequence[AllocationFacts],
    usage: Iterable[UsageFacts] = (),
) -> list[Finding]:
    """Findings for the plan as it stands: the violations it already has."""
    plan = _plan_of(cluster, allocations)
    peaks = _peaks_of(cluster, usage)
    findings: list[Finding] = []
    for key, allocation in plan.items():
        findings += _allocation_findings(cluster, allocation, baseline=None, peak=peaks.get(key))
    resources = set(cluster.capacities) | {resource for _, resource in plan}
    for resource in sorted(resources):
        findings += _capacity_sum_plan(cluster, resource, plan.values())
    return sort_findings(findings)


# --------------------------------------------------------------------------------------------
# Building the plan


def _plan_of(
    cluster: ClusterFacts, allocations: Iterable[AllocationFacts]
) -> dict[tuple[str, str], AllocationFacts]:
    return {(a.namespace, a.resource): a for a in allocations if a.cluster == cluster.name}


def _applied(
    cluster: ClusterFacts, change: PlanChange, existing: AllocationFacts | None
) -> AllocationFacts:
    template = existing or change.current
    values = {
        "guarantee": change.guarantee,
        "cap": change.cap,
        "per_pod_max": change.per_pod_max,
    }
    if template is not None:
        return replace(template, cluster=cluster.name, **values)
    return AllocationFacts(
        cluster=cluster.name, namespace=change.namespace, resource=change.resource, **values
    )


def _peaks_of(cluster: ClusterFacts, usage: Iterable[UsageFacts]) -> dict[tuple[str, str], Decimal]:
    return {
        (u.namespace, u.resource): u.typical_daily_peak for u in usage if u.cluster == cluster.name
    }


# --------------------------------------------------------------------------------------------
# Rules


def _finding(level: str, rule: str, field: str, message: str, a: AllocationFacts) -> Finding:
    return Finding(level, rule, field, message, a.cluster, a.namespace, a.resource)


def _percent(share: Decimal) -> str:
    return f"{format_amount(share * 100)}%"


def _allocation_findings(
    cluster: ClusterFacts,
    a: AllocationFacts,
    *,
    baseline: AllocationFacts | None,
    peak: Decimal | None,
) -> list[Finding]:
    """Rules about one allocation; ``baseline`` is its value before a change (None: no change
    being checked, or a new allocation)."""
    found: list[Finding] = []
    where = f"{a.namespace} {a.resource}"

    for field, label, value in (("guarantee", "guarantee", a.guarantee), ("cap", "cap", a.cap)):
        if value < 0:
            message = f"{label} {format_amount(value)} for {where} must not be negative"
            found.append(_finding(ERROR, RULE_NEGATIVE, field, message, a))
    if a.resource in cluster.whole_resources:
        for field, value in (
            ("guarantee", a.guarantee),
            ("cap", a.cap),
            ("per_pod_max", a.per_pod_max),
        ):
            message = whole_number_error(field, value, a.resource)
            if message:
                found.append(_finding(ERROR, RULE_WHOLE_UNITS, field, f"{message} ({where})", a))
    if a.per_pod_max is not None and a.per_pod_max <= 0:
        message = (
            f"per-pod max {format_amount(a.per_pod_max)} for {where} must be positive (or empty)"
        )
        found.append(_finding(ERROR, RULE_PER_POD_MAX_POSITIVE, "per_pod_max", message, a))

    if a.guarantee > a.cap:
        message = (
            f"guarantee {format_amount(a.guarantee)} exceeds cap {format_amount(a.cap)} "
            f"for {where} (guarantee ≤ cap)"
        )
        consequences = [
            text.format(borrowing=format_amount(a.cap - a.guarantee))
            for backend, text in _BACKEND_GUARANTEE_LE_CAP.items()
            if backend in cluster.backends
        ]
        if consequences:
            message += f" ({'; '.join(consequences)})"
        found.append(_finding(ERROR, RULE_GUARANTEE_LE_CAP, "guarantee", message, a))

    if a.per_pod_max is not None and a.per_pod_max > a.cap:
        message = (
            f"per-pod max {format_amount(a.per_pod_max)} exceeds cap {format_amount(a.cap)} for "
            f"{where} "
            "(per-pod max ≤ cap)"
        )
        found.append(_finding(ERROR, RULE_PER_POD_MAX_LE_CAP, "per_pod_max", message, a))

    capacity = cluster.capacities.get(a.resource)
    if capacity is None:
        # An allocation zeroed out (e.g. being removed) claims nothing, so it is no error.
        if a.guarantee != 0 or a.cap != 0:
            message = f"cluster {cluster.name} has no capacity for {a.resource}"
            found.append(_finding(ERROR, RULE_UNKNOWN_CAPACITY, "resource", message, a))
    else:
        max_cap = cluster.max_cap_share * capacity
        if a.cap > max_cap:
            message = (
                f"cap {format_amount(a.cap)} exceeds {_percent(cluster.max_cap_share)} of cluster "
                f"{cluster.name} capacity {format_amount(capacity)} {a.resource} (max "
                f"{format_amount(max_cap)})"
            )
            level = ERROR
            if baseline is not None and a.cap <= baseline.cap:
                # Already above the share (e.g. the share or the capacity was lowered since):
                # a change that does not raise the cap must not be blocked by it.
                level = WARNING
                message += (
                    f"; not blocking, the cap does not rise (was {format_amount(baseline.cap)})"
                )
            found.append(_finding(level, RULE_CAP_LE_SHARE, "cap", message, a))

    if peak is not None:
        floor = PEAK_SHARE * peak
        if a.guarantee < floor:
            message = (
                f"guarantee {format_amount(a.guarantee)} is below {_percent(PEAK_SHARE)} of "
                f"{a.namespace}'s typical daily peak {format_amount(peak)} {a.resource} last month "
                f"({format_amount(floor)})"
            )
            found.append(_finding(WARNING, RULE_GUARANTEE_BELOW_PEAK, "guarantee", message, a))
    return found


def _jump_findings(
    cluster: ClusterFacts,
    a: AllocationFacts,
    baseline: AllocationFacts | None,
    *,
    jump_factor: Decimal,
) -> list[Finding]:
    found: list[Finding] = []
    capacity = cluster.capacities.get(a.resource)
    for field in ("guarantee", "cap"):
        new = getattr(a, field)
        old = getattr(baseline, field) if baseline is not None else ZERO
        if new <= old:
            continue
        # A factor needs something to multiply: from zero (or a new allocation) only the
        # absolute rise counts.
        if old > 0 and new > jump_factor * old:
            ratio = (new / old).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)
            message = (
                f"{field} rises from {format_amount(old)} to {format_amount(new)} "
                f"(×{format_amount(ratio)})"
            )
        elif capacity and new - old > JUMP_CAPACITY_SHARE * capacity:
            message = (
                f"{field} rises from {format_amount(old)} to {format_amount(new)} "
                f"(+{format_amount(new - old)}, more than "
                f"{_percent(JUMP_CAPACITY_SHARE)} of cluster {cluster.name} capacity "
                f"{format_amount(capacity)} {a.resource})"
            )
        else:
            continue
        found.append(_finding(WARNING, RULE_LARGE_JUMP, field, message, a))
    return found


def _guaranteed(resource: str, allocations: Iterable[AllocationFacts]) -> Decimal:
    return sum((a.guarantee for a in allocations if a.resource == resource), ZERO)


def _capacity_sum_change(
    cluster: ClusterFacts,
    resource: str,
    before: Iterable[AllocationFacts],
    after: Iterable[AllocationFacts],
) -> list[Finding]:
    capacity = cluster.capacities.get(resource)
    if capacity is None:
        return []  # reported per allocation as unknown_capacity
    old, new = _guaranteed(resource, before), _guaranteed(resource, after)
    if new <= capacity:
        return []
    if new > old:
        free = max(capacity - old, ZERO)
        message = (
            f"guarantees on cluster {cluster.name} would sum to {format_amount(new)} {resource}, "
            f"above its capacity {format_amount(capacity)} (free to guarantee: "
            f"{format_amount(free)})"
        )
        level = ERROR
    else:
        # Already over-promised; a change that lowers (or keeps) the sum must stay possible.
        verb = "lowers it to" if new < old else "keeps it at"
        message = (
            f"guarantees on cluster {cluster.name} sum to {format_amount(old)} {resource}, above "
            "its "
            f"capacity {format_amount(capacity)}; this change {verb} {format_amount(new)}"
        )
        level = WARNING
    return [
        Finding(
            level, RULE_GUARANTEES_LE_CAPACITY, "guarantee", message, cluster.name, "", resource
        )
    ]


def _capacity_sum_plan(
    cluster: ClusterFacts, resource: str, plan: Iterable[AllocationFacts]
) -> list[Finding]:
    capacity = cluster.capacities.get(resource)
    if capacity is None:
        return []
    total = _guaranteed(resource, plan)
    if total <= capacity:
        return []
    message = (
        f"guarantees on cluster {cluster.name} sum to {format_amount(total)} {resource}, above its "
        f"capacity {format_amount(capacity)} (over by {format_amount(total - capacity)})"
    )
    return [
        Finding(
            ERROR, RULE_GUARANTEES_LE_CAPACITY, "guarantee", message, cluster.name, "", resource
        )
    ]
