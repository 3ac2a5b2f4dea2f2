"""Row locks of request decisions, in the order portal.locks.LOCK_ORDER states: the team's
budget (its row and those above it), the capacity rows the request draws on, the request, then
its allocations and clusters; the audit chain head (taken by every audit write) stays the last
lock.
"""

from approvals.models import ApprovalPolicy, QuotaRequest
from quotas.locks import (
    SELF,
    lock_allocations,
    lock_capacities,
    lock_clusters,
    lock_team_budget,
)


def lock_request(request_id: int) -> QuotaRequest:
    return QuotaRequest.objects.select_for_update(of=SELF).get(pk=request_id)


def lock_request_capacity(request: QuotaRequest) -> None:
    """First lock of every decision: the capacity rows the request draws on.

    Every path that changes allocations of a request locks these before the request row,
    so two admins approving competing requests serialize instead of both seeing free GPUs.
    Before them, the team and the teams above it, whose ceilings over every cluster the
    request counts against.
    """
    lock_team_budget(request.team_id)
    lock_capacities(request.lines.values_list("team_namespace__cluster_id", "resource_id"))


def lock_request_allocations(request: QuotaRequest) -> None:
    """After the capacity rows and the request: the grant an extension moves (its capacity
    rows are the extension's), then the allocations and clusters the request changes, so the
    audit chain head (taken by every audit write) is always the last lock of the transaction
    and no two paths wait on each other in a circle."""
    if request.extends_id is not None:
        lock_request(request.extends_id)
    lines = list(request.lines.values_list("team_namespace_id", "resource_id"))
    if not lines:
        return
    lock_allocations(lines)
    lock_clusters(request.lines.values_list("team_namespace__cluster_id", flat=True))


def lock_for_submit(request: QuotaRequest) -> None:
    """The locks of a submit, in their order, taken before the first audit write (the audit
    chain head must stay the last lock) when a submit follows in the same transaction."""
    lock_request_capacity(request)
    lock_request(request.pk)
    lock_request_allocations(request)


def request_lock(*, request: QuotaRequest, for_approval: bool = False) -> QuotaRequest:
    """The request row locked in the services' lock order (the capacity rows first when it may
    be approved), for a caller that checks a precondition (the API's If-Match) and then calls
    a service in the same transaction."""
    if for_approval:
        lock_request_capacity(request)
    return lock_request(request.pk)


def lock_approval_policy(policy_id: int) -> ApprovalPolicy:
    return ApprovalPolicy.objects.select_for_update(of=SELF).get(pk=policy_id)
