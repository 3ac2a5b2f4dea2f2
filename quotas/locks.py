"""Row locks of quotas' tables, taken in the one order portal.locks.LOCK_ORDER states.

Two transactions that lock rows in the same order wait for each other; in different orders
they can deadlock. So every service locks through this module (or usage.locks and
approvals.locks, for their own rows), in LOCK_ORDER: a transaction never locks a row of a
table that comes earlier than one it already locked, and rows of one table in id order.
The audit chain head, locked by every audit write, is last: write the audit events after the
other locks. (An UPDATE locks its rows too: ``cluster_plan_touch`` locks the cluster.)
"""

from collections.abc import Callable, Iterable

from django.contrib.auth.models import Group, User

from quotas.models.allocations import Allocation, RunTimeLimit
from quotas.models.audit import AuditChainHead
from quotas.models.clusters import Cluster, ClusterCapacity, PriorityClass, Resource
from quotas.models.teams import Team, TeamMembership, TeamNamespace

# Each function locks the rows of its own table only (FOR UPDATE OF): a plain FOR UPDATE locks
# every table the statement joins, and a model's default ordering joins tables.
SELF = ("self",)


def _ids(query) -> list[int]:
    return list(query.select_for_update(of=SELF).order_by("id").values_list("id", flat=True))


def _first(query):
    """The first row of ``query``, locked, or None."""
    return query.select_for_update(of=SELF).first()


def lock_group(group_id: int) -> Group | None:
    return _first(Group.objects.filter(pk=group_id))


def lock_user(user_id: int) -> User | None:
    return _first(User.objects.filter(pk=user_id))


def lock_team(team_id: int) -> Team | None:
    return _first(Team.objects.filter(pk=team_id))


def lock_team_budget(*team_ids: int) -> None:
    """The teams and every team above them: the ceilings over all clusters a decision of the
    teams counts against (quotas.budgets), so two admins approving a team's requests on two
    clusters serialize here instead of both seeing room under the ceiling. One statement, so
    the rows are locked in id order whatever the chains.

    FOR NO KEY UPDATE: it still serializes two decisions of the team, but leaves the row free
    for the foreign-key checks (KEY SHARE) other transactions run at COMMIT when they wrote a
    row naming the team (a draft request): with FOR UPDATE, a draft holding the audit chain's
    head and a submit holding the team and waiting for the head would deadlock."""
    chain: list[int] = []
    for team_id in team_ids:
        node: int | None = team_id
        while node is not None and node not in chain:
            chain.append(node)
            node = Team.objects.filter(pk=node).values_list("parent_id", flat=True).first()
    list(
        Team.objects.filter(pk__in=chain)
        .select_for_update(of=SELF, no_key=True)
        .order_by("id")
        .values_list("id", flat=True)
    )


def lock_membership(membership_id: int) -> TeamMembership | None:
    return _first(TeamMembership.objects.filter(pk=membership_id))


def lock_resource(resource_id: int) -> Resource | None:
    return _first(Resource.objects.filter(pk=resource_id))


def _pairs(model, fields: tuple[str, str], pairs: Iterable[tuple[int, int]]) -> None:
    """The rows of ``model`` whose two ``fields`` hold one of the ``pairs`` (those that exist)."""
    pairs = sorted(set(pairs))
    if not pairs:
        return
    query = model.objects.none()
    for values in pairs:
        query |= model.objects.filter(**dict(zip(fields, values, strict=True)))
    _ids(query)


# Rows of the apps built on quotas that a cluster's or a team namespace's deletion deletes with
# it and LOCK_ORDER puts first: each function is called with cluster_id= or team_namespace_id=
# (the other None) and locks its own rows. Registered by those apps when they load.
_DELETED_WITH: list[Callable[..., None]] = []


def lock_first_when_deleting(lock: Callable[..., None]) -> None:
    if lock not in _DELETED_WITH:
        _DELETED_WITH.append(lock)


def lock_deleted_with_cluster(cluster_id: int) -> None:
    """What deleting the cluster deletes with it and LOCK_ORDER puts first: the rows other apps
    registered (suggestions) and its capacities (before the cluster itself is locked)."""
    for lock in _DELETED_WITH:
        lock(cluster_id=cluster_id, team_namespace_id=None)
    _ids(ClusterCapacity.objects.filter(cluster_id=cluster_id))


def lock_deleted_with_namespace(team_namespace_id: int) -> None:
    """What deleting the team namespace deletes with it and LOCK_ORDER puts first."""
    for lock in _DELETED_WITH:
        lock(cluster_id=None, team_namespace_id=team_namespace_id)


def lock_capacities(pairs: Iterable[tuple[int, int]]) -> None:
    """The capacity rows of (cluster id, resource id) pairs."""
    _pairs(ClusterCapacity, ("cluster_id", "resource_id"), pairs)


def lock_capacity(*, cluster: Cluster, resource) -> ClusterCapacity | None:
    """One capacity row, or None when the cluster has none of the resource yet."""
    return _first(ClusterCapacity.objects.filter(cluster=cluster, resource=resource))


def lock_capacity_with_names(capacity_id: int) -> ClusterCapacity | None:
    """One capacity row, with its cluster and resource read alongside (not locked)."""
    return _first(
        ClusterCapacity.objects.select_related("cluster", "resource").filter(pk=capacity_id)
    )


def lock_allocations(pairs: Iterable[tuple[int, int]]) -> None:
    """The allocations of (team namespace id, resource id) pairs (those that exist)."""
    _pairs(Allocation, ("team_namespace_id", "resource_id"), pairs)


def lock_allocation(*, team_namespace, resource) -> Allocation | None:
    """One allocation, or None when the namespace has none of the resource yet."""
    return _first(Allocation.objects.filter(team_namespace=team_namespace, resource=resource))


def lock_team_namespace(team_namespace_id: int) -> TeamNamespace:
    return TeamNamespace.objects.select_for_update(of=SELF).get(pk=team_namespace_id)


def lock_run_time_limit(*, team_namespace_id: int, priority_class_id: int) -> RunTimeLimit | None:
    """One namespace's maximum run time of one class, or None when it has none."""
    return _first(
        RunTimeLimit.objects.filter(
            team_namespace_id=team_namespace_id, priority_class_id=priority_class_id
        )
    )


def lock_priority_class(priority_class_id: int, *, missing_ok: bool = True) -> PriorityClass | None:
    """None when it is gone (with ``missing_ok``; else PriorityClass.DoesNotExist)."""
    query = PriorityClass.objects.select_for_update(of=SELF).filter(pk=priority_class_id)
    return query.first() if missing_ok else query.get()


def lock_cluster(cluster_id: int) -> Cluster:
    return Cluster.objects.select_for_update(of=SELF).get(pk=cluster_id)


def lock_clusters(cluster_ids: Iterable[int] | None = None) -> list[Cluster]:
    """The clusters of ``cluster_ids``, or every cluster, in id order."""
    query = Cluster.objects.all()
    if cluster_ids is not None:
        query = query.filter(id__in=list(cluster_ids))
    return list(query.select_for_update(of=SELF).order_by("id"))


def lock_audit_head(*, missing_ok: bool = True) -> AuditChainHead | None:
    """The audit chain's head row: the last lock of a transaction. None while there is none
    (with ``missing_ok``; else AuditChainHead.DoesNotExist)."""
    query = AuditChainHead.objects.select_for_update(of=SELF).filter(pk=AuditChainHead.SINGLETON_ID)
    return query.first() if missing_ok else query.get()
