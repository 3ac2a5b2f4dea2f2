"""Reads of requests, scoped to who asks; previews of what a request would write."""

from collections import defaultdict
from decimal import Decimal

from django.db.models import QuerySet

from approvals.models import QuotaRequest, RequestLine
from common.amounts import format_amount
from quotas.kube.plan import AllocationChange, resource_plan
from quotas.kube.sync import Outcome, cluster_preview
from quotas.models import Allocation
from quotas.roles import AnyUser, is_platform_admin, sees_everything
from quotas.selectors import team_ids_of, teams_requestable_by

BASE_FIELDS = ("guarantee", "cap", "per_pod_max", "priority_classes")


def requests_visible_to(user: AnyUser) -> QuerySet[QuotaRequest]:
    """Admins and auditors see every request; people of a team see their team's."""
    if not user.is_authenticated or not user.is_active:
        return QuotaRequest.objects.none()
    if sees_everything(user):
        return QuotaRequest.objects.all()
    return QuotaRequest.objects.filter(team_id__in=team_ids_of(user))


# Who may do what to a request, whatever its status (the transitions table says when): the one
# answer the services enforce and the pages' buttons show. Platform admins act for every team,
# as they may request for every team; deciding is theirs alone, never on their own request.
EDITABLE = (QuotaRequest.Status.DRAFT, QuotaRequest.Status.CHANGES_REQUESTED)
WITHDRAWABLE = (*EDITABLE, QuotaRequest.Status.SUBMITTED, QuotaRequest.Status.APPROVED)


def may_request_for(user: AnyUser, team_id: int) -> bool:
    """Platform admins, and leads of the team (or of a department above it)."""
    return teams_requestable_by(user).filter(pk=team_id).exists()


def has_approved(user: AnyUser, request: QuotaRequest) -> bool:
    """The admin approved the request already: a second approval must come from another."""
    return request.approvals.filter(admin_id=user.pk).exists()


def requests_awaiting_decision_by(
    user: AnyUser, requests: QuerySet[QuotaRequest]
) -> QuerySet[QuotaRequest]:
    """Of ``requests``, those waiting for this platform admin: submitted, not their own, not
    approved by them yet (request_may's "decide" and has_approved, as a query)."""
    return (
        requests.filter(status=QuotaRequest.Status.SUBMITTED)
        .exclude(requested_by=user)
        .exclude(approvals__admin=user)
    )


def may_preview_in_clusters(user: AnyUser) -> bool:
    """Who sees what a request would write in the clusters (server-side dry runs): platform
    admins and auditors."""
    return sees_everything(user)


def request_may(user: AnyUser, request: QuotaRequest, action: str) -> bool:
    """Whether ``user``'s role lets them ``action`` the request: edit (revise), submit,
    rebase, withdraw, delete, decide (approve, reject, changes) or revoke."""
    if not user.is_authenticated or not user.is_active:
        return False
    is_requester = request.requested_by_id == user.pk
    if action in ("edit", "submit", "rebase"):
        return is_requester or may_request_for(user, request.team_id)
    if action in ("withdraw", "delete"):
        return is_requester
    if action == "decide":
        return is_platform_admin(user) and not is_requester
    if action == "revoke":
        return is_platform_admin(user)
    raise ValueError(f"unknown request action {action!r}")


def request_actions_for(user: AnyUser, request: QuotaRequest) -> set[str]:
    """What the user may do to the request now: their role (request_may) and its status."""
    S = QuotaRequest.Status
    now = {
        "edit": request.status in EDITABLE,
        "submit": request.status in EDITABLE,
        "withdraw": request.status in WITHDRAWABLE,
        "delete": request.status == S.DRAFT,
        "rebase": request.status in (S.DRAFT, S.SUBMITTED, S.CHANGES_REQUESTED),
        "decide": request.status == S.SUBMITTED,
        "revoke": request.status == S.APPROVED,
    }
    return {
        action
        for action, possible in now.items()
        if possible and request_may(user, request, action)
    }


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
    return value if isinstance(value, list) else format_amount(value)


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
