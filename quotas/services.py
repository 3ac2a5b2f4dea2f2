"""Writes of quota data: every allocation change makes a new kept version."""

import logging
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation

from django.contrib.auth.models import User
from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as ModelValidationError
from django.db import models, transaction
from django.db.models import F, ProtectedError, Sum
from django.utils.translation import gettext as _

from common.amounts import format_amount
from common.errors import ValidationFailed
from quotas.audit.chain import audit_record
from quotas.kube.render import MAX_RUN_TIME_CLASS_LENGTH
from quotas.locks import (
    lock_allocation,
    lock_capacity,
    lock_capacity_with_names,
    lock_cluster,
    lock_clusters,
    lock_priority_class,
    lock_run_time_limit,
    lock_team_namespace,
)
from quotas.models import (
    Allocation,
    AllocationVersion,
    Cluster,
    ClusterCapacity,
    PriorityClass,
    Resource,
    RunTimeLimit,
    SyncRequest,
    TeamNamespace,
)
from quotas.models.allocations import MAX_RUN_TIME_SECONDS
from quotas.rules import allocation_problems

log = logging.getLogger(__name__)


def _amount(value: object, field: str, *, negative_allowed: bool = False) -> Decimal:
    """The value as a finite number (not negative, unless ``negative_allowed``: the caller's
    rules say why not)."""
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, ValueError) as exc:
        raise ValidationFailed(
            _("%(field)s must be a number, got %(value)s") % {"field": field, "value": repr(value)},
            field=field,
        ) from exc
    if not amount.is_finite():
        raise ValidationFailed(
            _("%(field)s must be a finite number, got %(value)s")
            % {"field": field, "value": repr(value)},
            field=field,
        )
    if amount < 0 and not negative_allowed:
        raise ValidationFailed(
            _("%(field)s must not be negative, got %(value)s")
            % {"field": field, "value": f"{amount:f}"},
            field=field,
        )
    return amount


def model_checked(instance: models.Model, *, exclude: Iterable[str] = ()) -> None:
    """The model's own rules (field validators, uniqueness, constraints) as a ValidationFailed
    naming the first field that breaks one; every field's errors are in ``extra["errors"]``."""
    try:
        instance.full_clean(exclude=list(exclude))
    except ModelValidationError as exc:
        errors = (
            exc.message_dict if hasattr(exc, "error_dict") else {NON_FIELD_ERRORS: exc.messages}
        )
        field, messages = next(iter(errors.items()))
        named = None if field == NON_FIELD_ERRORS else field
        raise ValidationFailed(
            f"{named}: {messages[0]}" if named else messages[0],
            field=named,
            extra={"errors": errors},
        ) from None


def deleted_or_refused(instance: models.Model) -> None:
    """Delete ``instance``, or refuse with the objects that still depend on it (PROTECT)."""
    try:
        instance.delete()
    except ProtectedError as exc:
        names = sorted({str(o) for o in exc.protected_objects})
        raise ValidationFailed(
            _("%(object)s is still used by %(count)s object(s): %(objects)s")
            % {
                "object": str(instance),
                "count": len(names),
                "objects": ", ".join(names[:10]) + (" …" if len(names) > 10 else ""),
            },
        ) from None


def allocation_values_check(
    *,
    guarantee: object,
    cap: object,
    per_pod_max: object | None,
    where: str,
    resource: Resource | None = None,
) -> tuple[Decimal, Decimal, Decimal | None]:
    """The values of one allocation as numbers, refused (at its field) with the first rule of
    a single allocation they break: the rules module's (quotas.rules.allocation_problems), the
    texts the plan's findings give. ``where`` names the allocation ("namespace resource").
    The whole-plan rules live with requests.

    With the resource, amounts of whole-unit resources (GPUs, MIG slices, vGPU) must be whole.
    """
    g = _amount(guarantee, "guarantee", negative_allowed=True)
    c = _amount(cap, "cap", negative_allowed=True)
    p = (
        None
        if per_pod_max in (None, "")
        else _amount(per_pod_max, "per_pod_max", negative_allowed=True)
    )
    whole = resource is not None and resource.whole_units
    problems = allocation_problems(
        guarantee=g,
        cap=c,
        per_pod_max=p,
        where=where,
        whole_units_of=resource.name if whole else None,
    )
    if problems:
        _, field, text = problems[0]
        raise ValidationFailed(str(text), field=field)
    return g, c, p


def _allocation_state(allocation: Allocation) -> dict:
    amount = format_amount
    return {
        "namespace": allocation.team_namespace.name,
        "cluster": allocation.team_namespace.cluster.name,
        "resource": allocation.resource.name,
        "guarantee": amount(allocation.guarantee),
        "cap": amount(allocation.cap),
        "per_pod_max": amount(allocation.per_pod_max),
        "priority_classes": list(allocation.priority_classes),
        "version": allocation.version,
    }


def allocation_set(
    *,
    team_namespace: TeamNamespace,
    resource: Resource,
    guarantee: object,
    cap: object,
    per_pod_max: object | None = None,
    priority_classes: Iterable[str] = (),
    acting_user: User | None,
    reason: str = "",
    source: str = "",
) -> Allocation:
    """Set an allocation, keeping the previous state as a version; no-op if nothing changes.

    Runs inside the caller's transaction when there is one (approvals set several allocations
    and their audit events atomically).
    """
    g, c, p = allocation_values_check(
        guarantee=guarantee,
        cap=cap,
        per_pod_max=per_pod_max,
        where=f"{team_namespace.name} {resource.name}",
        resource=resource,
    )
    classes = sorted(set(priority_classes))
    with transaction.atomic():
        allocation = lock_allocation(team_namespace=team_namespace, resource=resource)
        before = None
        if allocation is None:
            allocation = Allocation.objects.create(
                team_namespace=team_namespace,
                resource=resource,
                guarantee=g,
                cap=c,
                per_pod_max=p,
                priority_classes=classes,
                version=1,
                updated_by=acting_user,
            )
        else:
            unchanged = (
                allocation.guarantee == g
                and allocation.cap == c
                and allocation.per_pod_max == p
                and sorted(allocation.priority_classes) == classes
            )
            if unchanged:
                return allocation
            before = _allocation_state(allocation)
            allocation.guarantee, allocation.cap, allocation.per_pod_max = g, c, p
            allocation.priority_classes = classes
            allocation.version += 1
            allocation.updated_by = acting_user
            allocation.save()
        cluster_plan_touch(cluster_id=team_namespace.cluster_id)
        AllocationVersion.objects.create(
            allocation=allocation,
            version=allocation.version,
            guarantee=g,
            cap=c,
            per_pod_max=p,
            priority_classes=classes,
            changed_by=acting_user,
            reason=reason,
            source=source,
        )
        audit_record(
            acting_user=acting_user,
            action="allocation.changed",
            target=allocation,
            before=before,
            after=_allocation_state(allocation),
            comment=f"{source}: {reason}" if source else reason,
        )
    return allocation


def cluster_plan_touch(*, cluster_id: int) -> int:
    """Mark the cluster's desired state as changed; returns the new plan generation."""
    Cluster.objects.filter(pk=cluster_id).update(plan_generation=F("plan_generation") + 1)
    return Cluster.objects.filter(pk=cluster_id).values_list("plan_generation", flat=True).get()


def cluster_sync_request(
    *,
    cluster: Cluster,
    acting_user: User | None,
    reason: str = "",
    namespaces: Iterable[str] | None = None,
) -> SyncRequest:
    """Record that the cluster must be synced (the outbox) and start the sync after commit.

    Called inside the transaction that changed the plan: if it rolls back, no sync is asked
    for; if the message is lost after commit, the reconciler finds the pending row.
    ``namespaces``: the team namespaces whose allocations alone the change set, so the sync
    plans only them (and what they feed); None when the change may reach anything.
    """
    generation = Cluster.objects.filter(pk=cluster.pk).values_list("plan_generation", flat=True)
    request = SyncRequest.objects.create(
        cluster=cluster,
        requested_by=acting_user,
        reason=reason[:500],
        generation=generation.get(),
        namespaces=None if namespaces is None else sorted(set(namespaces)),
    )
    cluster_id = cluster.pk
    transaction.on_commit(lambda: _sync_start(cluster_id))
    return request


def _sync_start(cluster_id: int) -> None:
    """Queue the sync once the change is committed; never raises.

    The change and its pending sync are committed by now: a broker that cannot be reached at
    this moment (restarting, a network cut) must not turn a committed approval into an error
    for its caller, who would retry what is already done. The reconciler re-drives the pending
    sync after SYNC_PENDING_REDRIVE_SECONDS.
    """
    from quotas.tasks import sync_cluster

    try:
        sync_cluster.delay(cluster_id)
    except Exception:
        log.warning(
            "could not queue the sync of cluster %s (the broker is unreachable?); the "
            "reconciler re-drives its pending sync",
            cluster_id,
            exc_info=True,
        )


def cluster_set_sync_mode(
    *, cluster: Cluster, mode: str, acting_user: User | None, comment: str = ""
) -> Cluster:
    """Switch enforce / report only / shadow (the staged rollout), audited, then sync."""
    if mode not in Cluster.SyncMode.values:
        allowed = ", ".join(Cluster.SyncMode.values)
        raise ValidationFailed(
            _("sync_mode must be one of %(allowed)s, got %(mode)s")
            % {"allowed": allowed, "mode": repr(mode)},
            field="sync_mode",
        )
    with transaction.atomic():
        locked = lock_cluster(cluster.pk)
        if locked.sync_mode == mode:
            return locked
        before = locked.sync_mode
        locked.sync_mode = mode
        locked.save(update_fields=["sync_mode", "updated_at"])
        audit_record(
            acting_user=acting_user,
            action="cluster.sync_mode",
            target=locked,
            before={"sync_mode": before},
            after={"sync_mode": mode},
            comment=comment,
        )
        cluster_plan_touch(cluster_id=locked.pk)
        cluster_sync_request(cluster=locked, acting_user=acting_user, reason=f"sync mode {mode}")
    return locked


def team_namespace_set_shadow(
    *, team_namespace: TeamNamespace, shadow: bool, acting_user: User | None, comment: str = ""
) -> TeamNamespace:
    """Put one team namespace in or out of shadow mode (canary rollout), audited, then sync."""
    with transaction.atomic():
        locked = lock_team_namespace(team_namespace.pk)
        if locked.shadow == shadow:
            return locked
        locked.shadow = shadow
        locked.save(update_fields=["shadow"])
        cluster_plan_touch(cluster_id=locked.cluster_id)  # locks the cluster: before the audit head
        audit_record(
            acting_user=acting_user,
            action="namespace.shadow",
            target=locked,
            before={"shadow": not shadow},
            after={"shadow": shadow},
            comment=comment,
        )
        cluster_sync_request(
            cluster=locked.cluster, acting_user=acting_user, reason=f"{locked.name} shadow={shadow}"
        )
    return locked


# --- capacities and priority classes (also what the Django admin calls) ----------------------


def cluster_capacity_check(*, cluster: Cluster, resource: Resource, capacity: object) -> Decimal:
    """A capacity never falls below what is guaranteed on it (guarantees are promises)."""
    amount = _amount(capacity, "capacity")
    guaranteed = Allocation.objects.filter(
        team_namespace__cluster=cluster, resource=resource
    ).aggregate(total=Sum("guarantee"))["total"] or Decimal(0)
    if amount < guaranteed:
        raise ValidationFailed(
            _(
                "capacity %(capacity)s is below the %(guaranteed)s %(resource)s guaranteed on "
                "%(cluster)s (sum of guarantees ≤ capacity)"
            )
            % {
                "capacity": format_amount(amount),
                "guaranteed": format_amount(guaranteed),
                "resource": resource.name,
                "cluster": cluster.name,
            },
            field="capacity",
        )
    return amount


def cluster_capacity_set(
    *, cluster: Cluster, resource: Resource, capacity: object, acting_user: User | None
) -> ClusterCapacity:
    """Set a cluster's capacity of one resource: checked, audited, then synced.

    Locks the capacity row first, as every approval does, so no approval promises GPUs the
    cluster is losing at the same moment.
    """
    with transaction.atomic():
        row = lock_capacity(cluster=cluster, resource=resource)
        amount = cluster_capacity_check(cluster=cluster, resource=resource, capacity=capacity)
        before = None if row is None else {"capacity": format_amount(row.capacity)}
        if row is None:
            row = ClusterCapacity.objects.create(
                cluster=cluster, resource=resource, capacity=amount
            )
        elif row.capacity == amount:
            return row
        else:
            row.capacity = amount
            row.save(update_fields=["capacity"])
        cluster_plan_touch(cluster_id=cluster.pk)
        cluster_sync_request(
            cluster=cluster, acting_user=acting_user, reason=f"capacity of {resource.name}"
        )
        audit_record(
            acting_user=acting_user,
            action="capacity.changed",
            target=row,
            before=before,
            after={
                "cluster": cluster.name,
                "resource": resource.name,
                "capacity": format_amount(amount),
            },
        )
    return row


PRIORITY_CLASS_IMMUTABLE = ("value", "preempts")


def _priority_class_state(pc: PriorityClass) -> dict:
    return {
        "name": pc.name,
        "value": pc.value,
        "preempts": pc.preempts,
        "description": pc.description,
    }


def priority_class_save(
    *, priority_class: PriorityClass, acting_user: User | None
) -> PriorityClass:
    """Create a PriorityClass, or change its description; audited; every cluster is synced.

    value and preemptionPolicy (preempts) are immutable in Kubernetes: changing them would make
    every later sync fail, so a different value is a new class.
    """
    with transaction.atomic():
        before = None
        if priority_class.pk:
            old = lock_priority_class(priority_class.pk, missing_ok=False)
            for field in ("name", *PRIORITY_CLASS_IMMUTABLE):
                if getattr(old, field) != getattr(priority_class, field):
                    raise ValidationFailed(
                        _(
                            "%(field)s of priority class %(name)s cannot change (it is immutable "
                            "in Kubernetes); create a new class instead"
                        )
                        % {"field": field, "name": old.name},
                        field=field,
                    )
            before = _priority_class_state(old)
            if before == _priority_class_state(priority_class):
                return priority_class
        priority_class.full_clean()
        priority_class.save()
        for cluster in lock_clusters():
            cluster_plan_touch(cluster_id=cluster.pk)
            cluster_sync_request(
                cluster=cluster,
                acting_user=acting_user,
                reason=f"priority class {priority_class.name}",
            )
        audit_record(
            acting_user=acting_user,
            action="priority_class.created" if before is None else "priority_class.changed",
            target=priority_class,
            before=before,
            after=_priority_class_state(priority_class),
        )
    return priority_class


def clusters_plan_changed(
    *, cluster_ids: Iterable[int] | None, acting_user: User | None, reason: str
) -> None:
    """Lock the clusters (every one with None), mark their desired state changed and ask for
    their syncs; call before the audit event (the clusters come before the audit head)."""
    for cluster in lock_clusters(cluster_ids):
        cluster_plan_touch(cluster_id=cluster.pk)
        cluster_sync_request(cluster=cluster, acting_user=acting_user, reason=reason)


def _every_cluster_synced(*, acting_user: User | None, reason: str) -> None:
    clusters_plan_changed(cluster_ids=None, acting_user=acting_user, reason=reason)


def priority_class_delete_problems(*, priority_class: PriorityClass) -> list[str]:
    """Why the class cannot be removed now (empty: it can): allocations that allow it."""
    limited = [
        f"{r.team_namespace.name} ({r.team_namespace.cluster.name})"
        for r in priority_class.run_time_limits.select_related("team_namespace__cluster")
    ]
    if limited:
        return [
            _(
                "priority class %(name)s has a maximum run time in %(count)s namespace(s): "
                "%(namespaces)s; remove those first"
            )
            % {
                "name": priority_class.name,
                "count": len(limited),
                "namespaces": ", ".join(limited[:10]) + (" …" if len(limited) > 10 else ""),
            }
        ]
    using = [
        f"{a.team_namespace.name} {a.resource.name} ({a.team_namespace.cluster.name})"
        for a in Allocation.objects.exclude(priority_classes=[])
        .select_related("team_namespace__cluster", "resource")
        .order_by("team_namespace__name", "resource__name")
        if priority_class.name in a.priority_classes
    ]
    if not using:
        return []
    return [
        _(
            "priority class %(name)s is allowed by %(count)s allocation(s): %(allocations)s; "
            "change them by request first"
        )
        % {
            "name": priority_class.name,
            "count": len(using),
            "allocations": ", ".join(using[:10]) + (" …" if len(using) > 10 else ""),
        }
    ]


def priority_class_delete(*, priority_class: PriorityClass, acting_user: User | None) -> None:
    """Remove a priority class no allocation allows: audited; every cluster is synced, which
    prunes the PriorityClass object the portal wrote there.

    The clusters are locked before the check, as every approval locks the clusters of its
    allocations before writing them, so no approval can give the class to an allocation
    between the check and the delete.
    """
    with transaction.atomic():
        locked = lock_priority_class(priority_class.pk)
        if locked is None:
            return  # removed meanwhile
        lock_clusters()
        problems = priority_class_delete_problems(priority_class=locked)
        if problems:
            raise ValidationFailed(problems[0], field="name")
        before = _priority_class_state(locked)
        gone = PriorityClass(pk=locked.pk, name=locked.name, value=locked.value)  # audit target
        locked.delete()
        _every_cluster_synced(
            acting_user=acting_user, reason=f"priority class {before['name']} removed"
        )
        audit_record(
            acting_user=acting_user,
            action="priority_class.deleted",
            target=gone,
            before=before,
            after=None,
        )


def cluster_capacity_delete_problems(*, capacity: ClusterCapacity) -> list[str]:
    """Why the capacity cannot be removed now (empty: it can): allocations of the resource."""
    allocations = Allocation.objects.filter(
        team_namespace__cluster_id=capacity.cluster_id, resource_id=capacity.resource_id
    )
    count = allocations.count()
    if not count:
        return []
    names = list(
        allocations.order_by("team_namespace__name")[:10].values_list(
            "team_namespace__name", flat=True
        )
    )
    return [
        _(
            "%(count)s allocation(s) of %(resource)s exist on %(cluster)s (%(namespaces)s): a "
            "resource leaves a cluster once no namespace there has an allocation of it"
        )
        % {
            "count": count,
            "resource": capacity.resource.name,
            "cluster": capacity.cluster.name,
            "namespaces": ", ".join(names) + (" …" if count > 10 else ""),
        }
    ]


def cluster_capacity_delete(*, capacity: ClusterCapacity, acting_user: User | None) -> None:
    """Remove a resource from a cluster while no allocation of it exists there: audited,
    then synced. Locks the capacity row first, as approvals do, so no approval creates an
    allocation of the resource between the check and the delete."""
    with transaction.atomic():
        row = lock_capacity_with_names(capacity.pk)
        if row is None:
            return
        problems = cluster_capacity_delete_problems(capacity=row)
        if problems:
            raise ValidationFailed(problems[0], field="capacity")
        before = {
            "cluster": row.cluster.name,
            "resource": row.resource.name,
            "capacity": format_amount(row.capacity),
        }
        gone = ClusterCapacity(
            pk=row.pk, cluster=row.cluster, resource=row.resource, capacity=row.capacity
        )
        row.delete()
        cluster_plan_touch(cluster_id=row.cluster_id)
        cluster_sync_request(
            cluster=row.cluster,
            acting_user=acting_user,
            reason=f"capacity of {before['resource']} removed",
        )
        audit_record(
            acting_user=acting_user,
            action="capacity.deleted",
            target=gone,
            before=before,
            after=None,
        )


# --- maximum run times ------------------------------------------------------------------------


def run_time_seconds(value: object, field: str = "max_seconds") -> int:
    """A maximum run time in whole seconds, 1 to 2147483647 (Kueue's int32), or the error."""
    if isinstance(value, bool):
        value = None
    try:
        seconds = int(str(value).strip()) if value is not None else None
    except ValueError:
        seconds = None
    if seconds is None or not 1 <= seconds <= MAX_RUN_TIME_SECONDS:
        raise ValidationFailed(
            _("%(field)s: a maximum run time is a whole number of seconds from 1 to %(max)s")
            % {"field": field, "max": MAX_RUN_TIME_SECONDS},
            field=field,
        )
    return seconds


def _run_time_limit_state(limit: RunTimeLimit) -> dict:
    ns = limit.team_namespace
    return {
        "cluster": ns.cluster.name,
        "namespace": ns.name,
        "priority_class": limit.priority_class.name,
        "max_seconds": limit.max_seconds,
    }


def run_time_limit_check(*, team_namespace: TeamNamespace, priority_class: PriorityClass) -> None:
    """A maximum run time is for a class pods of the namespace may use: where every allocation
    of the namespace limits its classes, one of them must allow it. Its name is the key of a
    Namespace annotation, so it has at most MAX_RUN_TIME_CLASS_LENGTH characters."""
    if len(priority_class.name) > MAX_RUN_TIME_CLASS_LENGTH:
        raise ValidationFailed(
            _(
                "priority_class: a maximum run time needs a class name of at most %(max)s "
                "characters (it names a Namespace annotation); %(name)s has %(length)s"
            )
            % {
                "max": MAX_RUN_TIME_CLASS_LENGTH,
                "name": priority_class.name,
                "length": len(priority_class.name),
            },
            field="priority_class",
        )
    lists = [a.priority_classes for a in team_namespace.allocations.all()]
    if lists and all(lists) and not any(priority_class.name in c for c in lists):
        allowed = sorted({name for c in lists for name in c})
        raise ValidationFailed(
            _(
                "priority_class: %(name)s is not allowed in namespace %(namespace)s "
                "(allowed: %(allowed)s), so a maximum run time for it would never apply"
            )
            % {
                "name": priority_class.name,
                "namespace": team_namespace.name,
                "allowed": ", ".join(allowed),
            },
            field="priority_class",
        )


def run_time_limit_set(
    *,
    team_namespace: TeamNamespace,
    priority_class: PriorityClass,
    max_seconds: object,
    acting_user: User | None,
) -> RunTimeLimit:
    """Set the maximum run time of one class in a team namespace: checked, audited, synced.

    Locks the namespace, the limit and the class (so the class cannot be removed while a limit
    comes to name it), then the cluster."""
    seconds = run_time_seconds(max_seconds)
    with transaction.atomic():
        ns = lock_team_namespace(team_namespace.pk)
        row = lock_run_time_limit(team_namespace_id=ns.pk, priority_class_id=priority_class.pk)
        pc = lock_priority_class(priority_class.pk)
        if pc is None:
            raise ValidationFailed(
                _("priority_class: %(name)s no longer exists") % {"name": priority_class.name},
                field="priority_class",
            )
        run_time_limit_check(team_namespace=ns, priority_class=pc)
        before = None if row is None else _run_time_limit_state(row)
        if row is None:
            row = RunTimeLimit(team_namespace=ns, priority_class=pc, max_seconds=seconds)
        elif row.max_seconds == seconds:
            return row
        else:
            row.max_seconds = seconds
        row.team_namespace, row.priority_class = ns, pc
        row.save()
        _run_time_limits_synced(ns, acting_user, f"maximum run time of {pc.name} in {ns.name}")
        audit_record(
            acting_user=acting_user,
            action="run_time_limit.set",
            target=row,
            before=before,
            after=_run_time_limit_state(row),
        )
    return row


def run_time_limit_delete(*, limit: RunTimeLimit, acting_user: User | None) -> None:
    """Remove a maximum run time: audited; the cluster is synced (the annotation goes)."""
    with transaction.atomic():
        ns = lock_team_namespace(limit.team_namespace_id)
        row = lock_run_time_limit(
            team_namespace_id=ns.pk, priority_class_id=limit.priority_class_id
        )
        if row is None:
            return  # removed meanwhile
        row.team_namespace = ns
        before = _run_time_limit_state(row)
        gone = RunTimeLimit(
            pk=row.pk, team_namespace=ns, priority_class=row.priority_class, max_seconds=0
        )
        row.delete()
        _run_time_limits_synced(
            ns, acting_user, f"maximum run time of {before['priority_class']} in {ns.name} removed"
        )
        audit_record(
            acting_user=acting_user,
            action="run_time_limit.deleted",
            target=gone,
            before=before,
            after=None,
        )


def _run_time_limits_synced(ns: TeamNamespace, acting_user: User | None, reason: str) -> None:
    cluster_plan_touch(cluster_id=ns.cluster_id)
    cluster_sync_request(
        cluster=ns.cluster, acting_user=acting_user, reason=reason, namespaces=[ns.name]
    )
