"""Row locks of request decisions, taken in one order by every path that changes a request
and the allocations it draws on: the capacity rows, the request, its allocations and
clusters; the audit chain head (taken by every audit write) stays the last lock.
"""

from approvals.models import QuotaRequest
from quotas.models import Allocation, Cluster, ClusterCapacity


def lock_request(request_id: int) -> QuotaRequest:
    return QuotaRequest.objects.select_for_update().get(pk=request_id)


def lock_request_capacity(request: QuotaRequest) -> None:
    """First lock of every decision: the capacity rows the request draws on, in id order.

    Every path that changes allocations of a request locks these before the request row,
    so two admins approving competing requests serialize instead of both seeing free GPUs.
    """
    lock_capacity_pairs(set(request.lines.values_list("team_namespace__cluster_id", "resource_id")))


def lock_capacity_pairs(pairs: set[tuple[int, int]]) -> None:
    """Lock the capacity rows of (cluster id, resource id) pairs, in id order."""
    if not pairs:
        return
    query = ClusterCapacity.objects.none()
    for cluster_id, resource_id in sorted(pairs):
        query |= ClusterCapacity.objects.filter(cluster_id=cluster_id, resource_id=resource_id)
    list(query.select_for_update().order_by("id").values_list("id", flat=True))


def lock_request_allocations(request: QuotaRequest) -> None:
    """After the capacity rows and the request: the allocations and clusters the request
    changes, in id order, so the audit chain head (taken by every audit write) is always the
    last lock of the transaction and no two paths wait on each other in a circle."""
    lines = list(request.lines.values_list("team_namespace_id", "resource_id"))
    if not lines:
        return
    query = Allocation.objects.none()
    for ns_id, resource_id in lines:
        query |= Allocation.objects.filter(team_namespace_id=ns_id, resource_id=resource_id)
    list(query.select_for_update().order_by("id").values_list("id", flat=True))
    cluster_ids = request.lines.values_list("team_namespace__cluster_id", flat=True)
    list(
        Cluster.objects.select_for_update()
        .filter(id__in=list(cluster_ids))
        .order_by("id")
        .values_list("id", flat=True)
    )


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
