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

Messages are :class:`~quotas.texts.Text` (English msgid + parameters): ``Finding.message`` is
rendered in the active language when the finding is made, and ``Finding.text`` lets a stored
finding be shown again in the reader's language.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from decimal import ROUND_HALF_UP, Decimal

from django.utils.translation import gettext_noop

from common.amounts import format_amount
from quotas.mig import CARD_MODELS, plan_layout
from quotas.texts import Text

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
RULE_MIG_LAYOUT = "mig_layout"
RULE_TOP_PRIORITY_SHARE = "top_priority_share"
RULE_TEAM_GPU_CEILING = "team_gpu_ceiling"
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
    RULE_MIG_LAYOUT,
    RULE_TOP_PRIORITY_SHARE,
    RULE_TEAM_GPU_CEILING,
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
    "volcano": gettext_noop("Volcano: capability must be ≥ deserved"),
    "kueue": gettext_noop("Kueue: borrowingLimit = cap - guarantee would be %(borrowing)s"),
    "yunikorn": gettext_noop("YuniKorn: max must be ≥ guaranteed"),
}
# Names of the amount fields in messages (English: the field's own name, as the API spells it).
FIELD_NAMES = {
    "guarantee": gettext_noop("guarantee"),
    "cap": gettext_noop("cap"),
    "per_pod_max": gettext_noop("per_pod_max"),
    "capacity": gettext_noop("capacity"),
}


def field_name(name: str) -> Text | str:
    """The field's name in messages, translated when it is one of the amount fields."""
    return Text(FIELD_NAMES[name]) if name in FIELD_NAMES else name


@dataclass(frozen=True)
class ClusterFacts:
    name: str
    capacities: dict[str, Decimal]  # resource name -> capacity
    max_cap_share: Decimal
    backends: frozenset[str] = frozenset()
    # Resources counted in whole units (GPUs, MIG slices, HAMi vGPU memory and cores).
    whole_resources: frozenset[str] = frozenset()
    # MIG-capable cards per model (quotas.mig.CARD_MODELS), and the MIG resources of those
    # models: resource name -> (card model, profile). Empty: no MIG layout is checked.
    gpu_cards: dict[str, int] = field(default_factory=dict)
    mig_resources: dict[str, tuple[str, str]] = field(default_factory=dict)
    # The largest share of a resource's capacity that may be guaranteed to namespaces whose
    # pods may use the highest priority class (``top_priority_classes``: the classes of the
    # highest value). None: no limit.
    top_priority_share: Decimal | None = None
    top_priority_classes: frozenset[str] = frozenset()


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
    # Guarantee promised on top of this allocation by temporary grants: the increase of a
    # grant approved to start later, and what a started grant that lowered the allocation
    # gives back at its end. Both land on top of whatever the allocation is then, so a
    # change of the allocation keeps it, and it counts in the capacity sum.
    held: Decimal = Decimal(0)
    # The PriorityClasses the namespace's pods may use with this resource.
    priority_classes: frozenset[str] = frozenset()


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
    # The classes the allocation will allow; None keeps those it has.
    priority_classes: frozenset[str] | None = None


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
    field: str  # "guarantee", "cap", "per_pod_max", "priority_classes" or "resource"
    message: str  # ``text`` in the language active when the finding was made
    cluster: str
    namespace: str  # "" for findings about a whole cluster and resource
    resource: str
    # The message as msgid and parameters, to render it again in another language.
    text: Text | None = field(default=None, compare=False)

    @classmethod
    def of(
        cls,
        level: str,
        rule: str,
        field: str,
        text: Text,
        cluster: str,
        namespace: str,
        resource: str,
    ) -> Finding:
        return cls(level, rule, field, str(text), cluster, namespace, resource, text)

    @property
    def is_error(self) -> bool:
        return self.level == ERROR


def whole_number_text(field: str, value: Decimal | None, resource: str) -> Text | None:
    """The message when an amount of a whole-unit resource has a fraction, else None."""
    if value is None or value == value.to_integral_value():
        return None
    return Text.of(
        gettext_noop("%(field)s must be a whole number of %(resource)s, got %(value)s"),
        field=field_name(field),
        resource=resource,
        value=format_amount(value),
    )


def whole_number_error(field: str, value: Decimal | None, resource: str) -> str | None:
    """:func:`whole_number_text` in the active language."""
    text = whole_number_text(field, value, resource)
    return None if text is None else str(text)


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
    others: Iterable[AllocationFacts] = (),
) -> list[Finding]:
    """Findings for the plan after ``changes`` are applied on top of ``allocations``.

    ``allocations`` is the cluster's plan before the change, one entry per namespace and
    resource (a later entry replaces an earlier one, so approved-but-not-applied values and
    active temporary grants can follow the stored rows). It may leave out the changed
    allocations: their ``current`` then stands in for them. Entries of other clusters are ignored.

    ``others`` are the rest of the cluster's allocations, which no change touches and which
    count only in the cluster's sums (guarantees against capacity, the highest priority class's
    share, MIG layouts): each may stand for several allocations of one resource and set of
    priority classes, summed, so a change costs what it touches, not the cluster's size. (The
    MIG layouts count whole instances: summing whole amounts first gives the same counts.)

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

    others = [a for a in others if a.cluster == cluster.name]
    summed_before, summed_after = [*before.values(), *others], [*after.values(), *others]
    peaks = _peaks_of(cluster, usage)
    findings: list[Finding] = []
    for key, baseline in baselines.items():
        allocation = after[key]
        findings += _allocation_findings(
            cluster, allocation, baseline=baseline, peak=peaks.get(key)
        )
        findings += _jump_findings(cluster, allocation, baseline, jump_factor=jump_factor)
    for resource in sorted({resource for _, resource in baselines}):
        findings += _capacity_sum_change(cluster, resource, summed_before, summed_after)
        findings += _top_priority_findings(cluster, resource, summed_after, summed_before)
    findings += _mig_layout_change(
        cluster, {resource for _, resource in baselines}, summed_before, summed_after
    )
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
        findings += _top_priority_findings(cluster, resource, plan.values(), None)
    for model in sorted({model for model, _ in cluster.mig_resources.values()}):
        findings += _mig_layout_findings(cluster, model, plan.values(), before=None)
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
    if change.priority_classes is not None:
        values["priority_classes"] = frozenset(change.priority_classes)
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


def _finding(level: str, rule: str, field: str, text: Text, a: AllocationFacts) -> Finding:
    return Finding.of(level, rule, field, text, a.cluster, a.namespace, a.resource)


def _percent(share: Decimal) -> str:
    return f"{format_amount(share * 100)}%"


def allocation_problems(
    *,
    guarantee: Decimal,
    cap: Decimal,
    per_pod_max: Decimal | None,
    where: str,
    whole_units_of: str | None = None,
    backends: Iterable[str] = (),
) -> list[tuple[str, str, Text]]:
    """The rules of one allocation on its own, as (rule, field, text) for each rule it breaks,
    in the order of RULES: the plan's findings (check_change, check_plan) and the services'
    refusal of one allocation's values (quotas.services.allocation_values_check) ask this one
    function. ``where`` names it ("namespace resource"); ``whole_units_of``, the resource
    when it is counted in whole units; ``backends``, the cluster's (what guarantee > cap
    means to each is said)."""
    found: list[tuple[str, str, Text]] = []
    negative = {
        "guarantee": gettext_noop("guarantee %(value)s for %(where)s must not be negative"),
        "cap": gettext_noop("cap %(value)s for %(where)s must not be negative"),
    }
    for field_, value in (("guarantee", guarantee), ("cap", cap)):
        if value < 0:
            text = Text.of(negative[field_], value=format_amount(value), where=where)
            found.append((RULE_NEGATIVE, field_, text))
    if whole_units_of is not None:
        for field_, value in (("guarantee", guarantee), ("cap", cap), ("per_pod_max", per_pod_max)):
            problem = whole_number_text(field_, value, whole_units_of)
            if problem:
                text = Text.of(
                    gettext_noop("%(problem)s (%(where)s)"), problem=problem, where=where
                )
                found.append((RULE_WHOLE_UNITS, field_, text))
    if per_pod_max is not None and per_pod_max <= 0:
        text = Text.of(
            gettext_noop("per-pod max %(value)s for %(where)s must be positive (or empty)"),
            value=format_amount(per_pod_max),
            where=where,
        )
        found.append((RULE_PER_POD_MAX_POSITIVE, "per_pod_max", text))
    if guarantee > cap:
        consequences = tuple(
            Text.of(msgid, borrowing=format_amount(cap - guarantee))
            for backend, msgid in _BACKEND_GUARANTEE_LE_CAP.items()
            if backend in backends
        )
        amounts = {"guarantee": format_amount(guarantee), "cap": format_amount(cap), "where": where}
        if consequences:
            text = Text.of(
                gettext_noop(
                    "guarantee %(guarantee)s exceeds cap %(cap)s for %(where)s "
                    "(guarantee ≤ cap) (%(consequences)s)"
                ),
                consequences=consequences,
                **amounts,
            )
        else:
            text = Text.of(
                gettext_noop(
                    "guarantee %(guarantee)s exceeds cap %(cap)s for %(where)s (guarantee ≤ cap)"
                ),
                **amounts,
            )
        found.append((RULE_GUARANTEE_LE_CAP, "guarantee", text))
    if per_pod_max is not None and per_pod_max > cap:
        text = Text.of(
            gettext_noop(
                "per-pod max %(per_pod_max)s exceeds cap %(cap)s for %(where)s (per-pod max ≤ cap)"
            ),
            per_pod_max=format_amount(per_pod_max),
            cap=format_amount(cap),
            where=where,
        )
        found.append((RULE_PER_POD_MAX_LE_CAP, "per_pod_max", text))
    return found


def _allocation_findings(
    cluster: ClusterFacts,
    a: AllocationFacts,
    *,
    baseline: AllocationFacts | None,
    peak: Decimal | None,
) -> list[Finding]:
    """Rules about one allocation; ``baseline`` is its value before a change (None: no change
    being checked, or a new allocation)."""
    found = [
        _finding(ERROR, rule, field_, text, a)
        for rule, field_, text in allocation_problems(
            guarantee=a.guarantee,
            cap=a.cap,
            per_pod_max=a.per_pod_max,
            where=f"{a.namespace} {a.resource}",
            whole_units_of=a.resource if a.resource in cluster.whole_resources else None,
            backends=cluster.backends,
        )
    ]

    capacity = cluster.capacities.get(a.resource)
    if capacity is None:
        # An allocation zeroed out (e.g. being removed) claims nothing, so it is no error.
        if a.guarantee != 0 or a.cap != 0:
            text = Text.of(
                gettext_noop("cluster %(cluster)s has no capacity for %(resource)s"),
                cluster=cluster.name,
                resource=a.resource,
            )
            found.append(_finding(ERROR, RULE_UNKNOWN_CAPACITY, "resource", text, a))
    else:
        max_cap = cluster.max_cap_share * capacity
        if a.cap > max_cap:
            values = {
                "cap": format_amount(a.cap),
                "share": _percent(cluster.max_cap_share),
                "cluster": cluster.name,
                "capacity": format_amount(capacity),
                "resource": a.resource,
                "max": format_amount(max_cap),
            }
            if baseline is not None and a.cap <= baseline.cap:
                # Already above the share (e.g. the share or the capacity was lowered since):
                # a change that does not raise the cap must not be blocked by it.
                level = WARNING
                text = Text.of(
                    gettext_noop(
                        "cap %(cap)s exceeds %(share)s of cluster %(cluster)s capacity "
                        "%(capacity)s %(resource)s (max %(max)s); not blocking, the cap does "
                        "not rise (was %(was)s)"
                    ),
                    was=format_amount(baseline.cap),
                    **values,
                )
            else:
                level = ERROR
                text = Text.of(
                    gettext_noop(
                        "cap %(cap)s exceeds %(share)s of cluster %(cluster)s capacity "
                        "%(capacity)s %(resource)s (max %(max)s)"
                    ),
                    **values,
                )
            found.append(_finding(level, RULE_CAP_LE_SHARE, "cap", text, a))

    if peak is not None:
        floor = PEAK_SHARE * peak
        if a.guarantee < floor:
            text = Text.of(
                gettext_noop(
                    "guarantee %(guarantee)s is below %(share)s of %(namespace)s's typical "
                    "daily peak %(peak)s %(resource)s last month (%(floor)s)"
                ),
                guarantee=format_amount(a.guarantee),
                share=_percent(PEAK_SHARE),
                namespace=a.namespace,
                peak=format_amount(peak),
                resource=a.resource,
                floor=format_amount(floor),
            )
            found.append(_finding(WARNING, RULE_GUARANTEE_BELOW_PEAK, "guarantee", text, a))
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
    for field_ in ("guarantee", "cap"):
        new = getattr(a, field_)
        old = getattr(baseline, field_) if baseline is not None else ZERO
        if new <= old:
            continue
        # A factor needs something to multiply: from zero (or a new allocation) only the
        # absolute rise counts.
        if old > 0 and new > jump_factor * old:
            ratio = (new / old).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)
            text = Text.of(
                gettext_noop("%(field)s rises from %(old)s to %(new)s (×%(ratio)s)"),
                field=field_name(field_),
                old=format_amount(old),
                new=format_amount(new),
                ratio=format_amount(ratio),
            )
        elif capacity and new - old > JUMP_CAPACITY_SHARE * capacity:
            text = Text.of(
                gettext_noop(
                    "%(field)s rises from %(old)s to %(new)s (+%(rise)s, more than %(share)s "
                    "of cluster %(cluster)s capacity %(capacity)s %(resource)s)"
                ),
                field=field_name(field_),
                old=format_amount(old),
                new=format_amount(new),
                rise=format_amount(new - old),
                share=_percent(JUMP_CAPACITY_SHARE),
                cluster=cluster.name,
                capacity=format_amount(capacity),
                resource=a.resource,
            )
        else:
            continue
        found.append(_finding(WARNING, RULE_LARGE_JUMP, field_, text, a))
    return found


def _guaranteed(resource: str, allocations: Iterable[AllocationFacts]) -> Decimal:
    return sum((a.guarantee + a.held for a in allocations if a.resource == resource), ZERO)


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
    values = {"cluster": cluster.name, "resource": resource, "capacity": format_amount(capacity)}
    if new > old:
        text = Text.of(
            gettext_noop(
                "guarantees on cluster %(cluster)s would sum to %(new)s %(resource)s, above its "
                "capacity %(capacity)s (free to guarantee: %(free)s)"
            ),
            new=format_amount(new),
            free=format_amount(max(capacity - old, ZERO)),
            **values,
        )
        level = ERROR
    else:
        # Already over-promised; a change that lowers (or keeps) the sum must stay possible.
        if new < old:
            msgid = gettext_noop(
                "guarantees on cluster %(cluster)s sum to %(old)s %(resource)s, above its "
                "capacity %(capacity)s; this change lowers it to %(new)s"
            )
        else:
            msgid = gettext_noop(
                "guarantees on cluster %(cluster)s sum to %(old)s %(resource)s, above its "
                "capacity %(capacity)s; this change keeps it at %(new)s"
            )
        text = Text.of(msgid, old=format_amount(old), new=format_amount(new), **values)
        level = WARNING
    return [
        Finding.of(
            level, RULE_GUARANTEES_LE_CAPACITY, "guarantee", text, cluster.name, "", resource
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
    text = Text.of(
        gettext_noop(
            "guarantees on cluster %(cluster)s sum to %(total)s %(resource)s, above its "
            "capacity %(capacity)s (over by %(over)s)"
        ),
        cluster=cluster.name,
        total=format_amount(total),
        resource=resource,
        capacity=format_amount(capacity),
        over=format_amount(total - capacity),
    )
    return [
        Finding.of(
            ERROR, RULE_GUARANTEES_LE_CAPACITY, "guarantee", text, cluster.name, "", resource
        )
    ]


def top_priority_guaranteed(
    cluster: ClusterFacts, resource: str, allocations: Iterable[AllocationFacts]
) -> Decimal:
    """The guarantee of ``resource`` held by namespaces whose pods may use a highest class."""
    top = cluster.top_priority_classes
    return sum(
        (
            a.guarantee + a.held
            for a in allocations
            if a.resource == resource and top & a.priority_classes
        ),
        ZERO,
    )


def _top_priority_findings(
    cluster: ClusterFacts,
    resource: str,
    plan: Iterable[AllocationFacts],
    before: Iterable[AllocationFacts] | None,
) -> list[Finding]:
    """The highest priority class used sparingly: what namespaces allowed it are guaranteed
    stays within the cluster's share of the capacity. With ``before`` (a change): an error
    only when the change raises that sum, else a warning, as for the capacity sum."""
    share, capacity = cluster.top_priority_share, cluster.capacities.get(resource)
    if share is None or not cluster.top_priority_classes or not capacity:
        return []
    limit = share * capacity
    total = top_priority_guaranteed(cluster, resource, plan)
    if total <= limit:
        return []
    old = None if before is None else top_priority_guaranteed(cluster, resource, before)
    values = {
        "cluster": cluster.name,
        "classes": ", ".join(sorted(cluster.top_priority_classes)),
        "total": format_amount(total),
        "resource": resource,
        "share": _percent(share),
        "capacity": format_amount(capacity),
        "max": format_amount(limit),
    }
    if old is None:
        text = Text.of(
            gettext_noop(
                "namespaces allowed the highest priority class (%(classes)s) on cluster "
                "%(cluster)s are guaranteed %(total)s %(resource)s, above %(share)s of its "
                "capacity %(capacity)s (max %(max)s, over by %(over)s)"
            ),
            over=format_amount(total - limit),
            **values,
        )
        level = ERROR
    elif total <= old:
        text = Text.of(
            gettext_noop(
                "namespaces allowed the highest priority class (%(classes)s) on cluster "
                "%(cluster)s are guaranteed %(total)s %(resource)s, above %(share)s of its "
                "capacity %(capacity)s (max %(max)s); not blocking, this change does not "
                "raise it"
            ),
            **values,
        )
        level = WARNING
    else:
        text = Text.of(
            gettext_noop(
                "namespaces allowed the highest priority class (%(classes)s) on cluster "
                "%(cluster)s would be guaranteed %(total)s %(resource)s, above %(share)s of "
                "its capacity %(capacity)s (max %(max)s): give the highest class sparingly"
            ),
            **values,
        )
        level = ERROR
    return [
        Finding.of(
            level, RULE_TOP_PRIORITY_SHARE, "priority_classes", text, cluster.name, "", resource
        )
    ]


# --------------------------------------------------------------------------------------------
# MIG layouts


def mig_demand(
    cluster: ClusterFacts, model: str, allocations: Iterable[AllocationFacts]
) -> dict[str, int]:
    """The MIG instances guaranteed on the cluster's cards of ``model``, per profile."""
    demand: dict[str, int] = {}
    for a in allocations:
        found = cluster.mig_resources.get(a.resource)
        if found is not None and found[0] == model:
            amount = a.guarantee + a.held
            demand[found[1]] = demand.get(found[1], 0) + int(amount.to_integral_value())
    return demand


def _mig_layout_change(
    cluster: ClusterFacts,
    changed: set[str],
    before: Iterable[AllocationFacts],
    after: Iterable[AllocationFacts],
) -> list[Finding]:
    before, after = list(before), list(after)
    models = sorted({cluster.mig_resources[r][0] for r in changed if r in cluster.mig_resources})
    findings = []
    for model in models:
        findings += _mig_layout_findings(
            cluster, model, after, before=mig_demand(cluster, model, before), changed=changed
        )
    return findings


def _mig_layout_findings(
    cluster: ClusterFacts,
    model: str,
    plan: Iterable[AllocationFacts],
    *,
    before: dict[str, int] | None,
    changed: set[str] = frozenset(),
) -> list[Finding]:
    """Whether the guaranteed MIG instances of one card model can be cut from the cluster's
    cards of it (quotas.mig.plan_layout). With ``before`` (a change): an error only when the
    change raises the guarantee of some profile, else a warning, as for the capacity sum."""
    cards = cluster.gpu_cards.get(model, 0)
    resources = sorted(r for r, (m, _) in cluster.mig_resources.items() if m == model)
    resource = next((r for r in resources if r in changed), resources[0])
    demand = mig_demand(cluster, model, plan)
    layout = plan_layout(model, cards, demand)
    if layout.fits:
        return []
    values = {"cluster": cluster.name, "model": model, "cards": cards}
    if layout.unknown:
        text = Text.of(
            gettext_noop(
                "%(profiles)s: no MIG profile of %(model)s (its profiles: %(known)s), so "
                "cluster %(cluster)s cannot cut it from its cards"
            ),
            profiles=", ".join(layout.unknown),
            known=", ".join(p.name for p in CARD_MODELS[model].profiles),
            **values,
        )
        resource = next(
            (r for r in resources if cluster.mig_resources[r][1] in layout.unknown), resource
        )
    elif layout.cards_needed is not None:
        text = Text.of(
            gettext_noop(
                "guaranteed MIG instances on cluster %(cluster)s (%(demand)s) cannot be cut "
                "from its %(cards)s %(model)s cards: they take %(needed)s cards"
            ),
            demand=_demand_words(demand),
            needed=layout.cards_needed,
            **values,
        )
    elif not layout.proven and layout.at_least <= cards:
        text = Text.of(
            gettext_noop(
                "guaranteed MIG instances on cluster %(cluster)s (%(demand)s): no layout on "
                "its %(cards)s %(model)s cards was found within the search's limit"
            ),
            demand=_demand_words(demand),
            **values,
        )
        return [Finding.of(WARNING, RULE_MIG_LAYOUT, "guarantee", text, cluster.name, "", resource)]
    else:
        text = Text.of(
            gettext_noop(
                "guaranteed MIG instances on cluster %(cluster)s (%(demand)s) cannot be cut "
                "from its %(cards)s %(model)s cards: they take at least %(needed)s cards"
            ),
            demand=_demand_words(demand),
            needed=layout.at_least,
            **values,
        )
    raised = before is None or any(n > before.get(p, 0) for p, n in demand.items())
    level = ERROR if raised else WARNING
    return [Finding.of(level, RULE_MIG_LAYOUT, "guarantee", text, cluster.name, "", resource)]


def _demand_words(demand: dict[str, int]) -> str:
    return ", ".join(f"{n} × {p}" for p, n in sorted(demand.items()) if n)
