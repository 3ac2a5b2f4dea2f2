"""The allocation values in force at a moment in the past, as the usage figures count them:
the allocation version current at that time; before the first version, the first version's
(history imported from before the portal knew the allocation is measured against its first
values); without versions the allocation's own; without an allocation 0 and 0."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import datetime
from decimal import Decimal

from quotas.models import Allocation, AllocationVersion

ZERO = Decimal(0)

# (namespace id, resource id, time) -> (guarantee, cap) in force then
ValuesAt = Callable[[int, int, datetime], tuple[Decimal, Decimal]]


def values_in_force(pairs: Iterable[tuple[int, int]]) -> ValuesAt:
    """The lookup for these (namespace id, resource id) pairs, in two queries."""
    namespace_ids = {ns_id for ns_id, _ in pairs}
    current = {
        (a.team_namespace_id, a.resource_id): (a.guarantee, a.cap)
        for a in Allocation.objects.filter(team_namespace_id__in=namespace_ids)
    }
    history: dict[tuple[int, int], list[tuple[datetime, Decimal, Decimal]]] = defaultdict(list)
    versions = (
        AllocationVersion.objects.filter(allocation__team_namespace_id__in=namespace_ids)
        .order_by("allocation_id", "version")
        .values_list(
            "allocation__team_namespace_id",
            "allocation__resource_id",
            "changed_at",
            "guarantee",
            "cap",
        )
    )
    for ns_id, res_id, changed_at, guarantee, cap in versions:
        history[(ns_id, res_id)].append((changed_at, guarantee, cap))

    def values_at(ns_id: int, res_id: int, at: datetime) -> tuple[Decimal, Decimal]:
        steps = history.get((ns_id, res_id))
        if not steps:
            return current.get((ns_id, res_id), (ZERO, ZERO))
        values = steps[0][1:]
        for changed_at, guarantee, cap in steps[1:]:
            if changed_at > at:
                break
            values = (guarantee, cap)
        return values

    return values_at
