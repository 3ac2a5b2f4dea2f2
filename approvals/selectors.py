"""Reads of requests, scoped to who asks; previews of what a request would write."""

from collections import defaultdict
from decimal import Decimal

from django.db.models import QuerySet

from approvals.models import QuotaRequest, RequestLine
from quotas.kube.plan import AllocationChange, resource_plan
from quotas.kube.sync import Outcome, cluster_preview
from quotas.models import Allocation
from quotas.roles import AnyUser, sees_everything
from quotas.selectors import team_ids_of
from quotas.services import amount_text

BASE_FIELDS = ("guarantee", "cap", "per_pod_max", "priority_classes")


def requests_visible_to(user: AnyUser) -> QuerySet[QuotaRequest]:
    """Admins and auditors see every request; people of a team see their team's."""
    if not user.is_authenticated or not user.is_active:
        return QuotaRequest.objects.none()
    if sees_everything(user):
        return QuotaRequest.objects.all()
    return QuotaRequest.objects.filter(team_id__in=team_ids_of(user))


def request_preview(request: QuotaRequest) -> dict[str, list[Outcome]]:
    """Per cluster, what approving the request would change, from server-side dry runs."""
    return lines_preview(
        allocation_changes(request.lines.select_related("team_namespace__cluster", "resource"))
    )


def allocation_changes(lines) -> dict[tuple[int, str], list[AllocationChange]]:
    """Per (cluster id, name), the allocation changes the lines' final values make. Read from
    the lines in memory, so a caller may collect them inside a transaction it rolls back."""
    changes: dict[tuple[int, str], list[AllocationChange]] = defaultdict(list)
    for line in lines:
        resource = line.resource
        cluster = line.team_namespace.cluster
        changes[(cluster.pk, cluster.name)].append(
            AllocationChange(
                namespace=line.team_namespace.name,
                resource=resource_plan(resource),
                guarantee=line.final_guarantee,
                cap=line.final_cap,
                per_pod_max=line.final_per_pod_max,
                priority_classes=tuple(line.final_priority_classes),
            )
        )
    return changes


def lines_preview(
    changes: dict[tuple[int, str], list[AllocationChange]],
) -> dict[str, list[Outcome]]:
    """Per cluster name, the dry-run outcomes of the changes (calls the clusters: run it
    outside any transaction)."""
    return {
        name: cluster_preview(cluster_id=cluster_id, changes=cluster_changes)
        for (cluster_id, name), cluster_changes in changes.items()
    }


def _allocation_values(allocation: Allocation | None) -> dict:
    if allocation is None:
        return {
            "guarantee": Decimal(0),
            "cap": Decimal(0),
            "per_pod_max": None,
            "priority_classes": [],
        }
    return {
        "guarantee": allocation.guarantee,
        "cap": allocation.cap,
        "per_pod_max": allocation.per_pod_max,
        "priority_classes": sorted(allocation.priority_classes),
    }


def line_base_values(line: RequestLine) -> dict:
    """The allocation the line was written against: its current_* values are read at the
    base version (at creation, at submit while unchanged, and at each rebase)."""
    return {
        "guarantee": line.current_guarantee,
        "cap": line.current_cap,
        "per_pod_max": line.current_per_pod_max,
        "priority_classes": sorted(line.current_priority_classes),
    }


def _text(value) -> object:
    return value if isinstance(value, list) else amount_text(value)


def request_base_changes(lines: list[RequestLine]) -> list[dict]:
    """What changed in the allocations since each line was written: one entry per field whose
    value differs between the line's base version and the allocation now (none: up to date).

    The approval refuses a request with changes (a lost update otherwise) and the request
    page offers a rebase; both ask this one function.
    """
    changes = []
    for index, line in enumerate(lines):
        allocation = Allocation.objects.filter(
            team_namespace_id=line.team_namespace_id, resource_id=line.resource_id
        ).first()
        version = allocation.version if allocation else None
        if version == line.base_version:
            continue
        base, now = line_base_values(line), _allocation_values(allocation)
        for field in BASE_FIELDS:
            if base[field] != now[field]:
                changes.append(
                    {
                        "line": line.pk,
                        "index": index,
                        "cluster": line.team_namespace.cluster.name,
                        "namespace": line.team_namespace.name,
                        "resource": line.resource.name,
                        "field": field,
                        "base": _text(base[field]),
                        "current": _text(now[field]),
                        "base_version": line.base_version,
                        "current_version": version,
                    }
                )
    return changes


def allocation_values_now(line: RequestLine) -> tuple[Allocation | None, dict]:
    allocation = Allocation.objects.filter(
        team_namespace_id=line.team_namespace_id, resource_id=line.resource_id
    ).first()
    return allocation, _allocation_values(allocation)
