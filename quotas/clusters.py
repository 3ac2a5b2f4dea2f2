"""Writes of clusters' settings (connection, scheduler backends, rules) and of the resource
catalogue: checked, audited in the same transaction, then synced.

Capacities, priority classes and sync modes have their own services (quotas.services); the
Django admin, seed_demo and anything else that changes clusters or resources call these.
"""

from urllib.parse import urlsplit, urlunsplit

from django.contrib.auth.models import User
from django.db import transaction
from django.utils.translation import gettext as _

from common.amounts import format_amount
from common.errors import ValidationFailed
from quotas.audit.chain import audit_changed_fields, audit_record
from quotas.locks import lock_cluster, lock_deleted_with_cluster, lock_resource
from quotas.models import Cluster, ClusterCapacity, Resource, TeamNamespace
from quotas.services import clusters_plan_changed, deleted_or_refused, model_checked

# --- clusters ----------------------------------------------------------------------------------

# Fields that only describe the cluster to people: a change of the others changes what is
# written to it (or how it is reached), so the cluster is synced.
CLUSTER_DESCRIPTIVE_FIELDS = frozenset(
    {
        "display_name",
        "description",
        "max_cap_share",
        "top_priority_share",
        "gpu_cards",
        "gpu_hour_price",
        "suggest_idle_price",
        "suggest_borrowed_price",
        "suggest_inference_borrowed_price",
        "suggest_blocked_price",
    }
)


def _url_without_credentials(url: str) -> str:
    """The URL as the log may keep it: no user or password, no query (tokens travel there)."""
    if not url:
        return url
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"  # an IPv6 address
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _pool(amount) -> str | None:
    return None if amount is None else format_amount(amount)


def _cluster_state(cluster: Cluster) -> dict:
    """What the log keeps of a cluster's settings: where the kubeconfig lies, never what it
    holds (credentials live in the file, outside the database)."""
    return {
        "name": cluster.name,
        "display_name": cluster.display_name,
        "description": cluster.description,
        "environment": cluster.environment,
        "connection": cluster.connection,
        "kubeconfig_path": cluster.kubeconfig_path,
        "kubeconfig_context": cluster.kubeconfig_context,
        "sandbox_url": _url_without_credentials(cluster.sandbox_url),
        "volcano_enabled": cluster.volcano_enabled,
        "kueue_enabled": cluster.kueue_enabled,
        "yunikorn_enabled": cluster.yunikorn_enabled,
        "max_cap_share": _pool(cluster.max_cap_share),
        "top_priority_share": _pool(cluster.top_priority_share),
        "kueue_cohort": cluster.kueue_cohort,
        "kueue_cpu_pool": _pool(cluster.kueue_cpu_pool),
        "kueue_memory_pool_gib": _pool(cluster.kueue_memory_pool_gib),
        "yunikorn_namespace": cluster.yunikorn_namespace,
        "gpu_cards": dict(sorted((cluster.gpu_cards or {}).items())),
        "gpu_hour_price": _pool(cluster.gpu_hour_price),
        "suggest_idle_price": _pool(cluster.suggest_idle_price),
        "suggest_borrowed_price": _pool(cluster.suggest_borrowed_price),
        "suggest_inference_borrowed_price": _pool(cluster.suggest_inference_borrowed_price),
        "suggest_blocked_price": _pool(cluster.suggest_blocked_price),
    }


def cluster_save(*, cluster: Cluster, acting_user: User | None, comment: str = "") -> Cluster:
    """Create a cluster or change its settings (as ``cluster`` holds them): audited; a change
    of what is written to it or of how it is reached syncs it. The sync mode, capacities and
    plan generation are not changed here (their own services do)."""
    with transaction.atomic():
        old = lock_cluster(cluster.pk) if cluster.pk else None
        before = _cluster_state(old) if old is not None else None
        model_checked(cluster)
        changes = audit_changed_fields(before, _cluster_state(cluster), keep=("name",))
        if changes is None:
            return cluster
        if old is not None:
            # Moved only by their own services (audited there), whatever the instance holds.
            cluster.sync_mode, cluster.plan_generation = old.sync_mode, old.plan_generation
        cluster.save()
        # A new cluster has nothing of the portal's to write yet: its first namespace syncs it.
        if before is not None and set(changes[1]) - CLUSTER_DESCRIPTIVE_FIELDS - {"name"}:
            clusters_plan_changed(
                cluster_ids=[cluster.pk],
                acting_user=acting_user,
                reason=f"cluster {cluster.name} settings",
            )
            cluster.refresh_from_db(fields=["plan_generation"])
        audit_record(
            acting_user=acting_user,
            action="cluster.created" if before is None else "cluster.changed",
            target=cluster,
            before=changes[0],
            after=changes[1],
            comment=comment,
        )
    return cluster


def cluster_delete_problems(*, cluster: Cluster) -> list[str]:
    """Why the cluster cannot be removed now (empty: it can): its team namespaces."""
    names = list(
        TeamNamespace.objects.filter(cluster=cluster)
        .order_by("name")
        .values_list("name", flat=True)
    )
    if not names:
        return []
    return [
        _(
            "cluster %(cluster)s has %(count)s team namespace(s) (%(namespaces)s): a cluster is "
            "removed once no team has a namespace there"
        )
        % {
            "cluster": cluster.name,
            "count": len(names),
            "namespaces": ", ".join(names[:10]) + (" …" if len(names) > 10 else ""),
        }
    ]


def cluster_delete(*, cluster: Cluster, acting_user: User | None, comment: str = "") -> None:
    """Remove a cluster no team has a namespace on, with its capacities: audited."""
    with transaction.atomic():
        lock_deleted_with_cluster(cluster.pk)
        try:
            locked = lock_cluster(cluster.pk)
        except Cluster.DoesNotExist:
            return
        problems = cluster_delete_problems(cluster=locked)
        if problems:
            raise ValidationFailed(problems[0], field="name")
        before = {
            **_cluster_state(locked),
            "capacities": {
                name: format_amount(amount)
                for name, amount in ClusterCapacity.objects.filter(cluster=locked)
                .order_by("resource__name")
                .values_list("resource__name", "capacity")
            },
        }
        gone = Cluster(pk=locked.pk, name=locked.name)  # the audit target
        deleted_or_refused(locked)
        audit_record(
            acting_user=acting_user,
            action="cluster.deleted",
            target=gone,
            before=before,
            after=None,
            comment=comment,
        )


# --- resources ---------------------------------------------------------------------------------


def _resource_state(resource: Resource) -> dict:
    return {
        "name": resource.name,
        "display_name": resource.display_name,
        "kind": resource.kind,
        "unit": resource.unit,
        "quantity_suffix": resource.quantity_suffix,
        "gpu_model": resource.gpu_model,
    }


def resource_save(*, resource: Resource, acting_user: User | None, comment: str = "") -> Resource:
    """Create a resource or change it: audited; a change syncs the clusters that have a
    capacity of it (its name, kind and suffix shape what is written there)."""
    with transaction.atomic():
        old = lock_resource(resource.pk) if resource.pk else None
        before = _resource_state(old) if old is not None else None
        model_checked(resource)
        changes = audit_changed_fields(before, _resource_state(resource), keep=("name",))
        if changes is None:
            return resource
        resource.save()
        if before is not None:
            clusters_plan_changed(
                cluster_ids=set(
                    ClusterCapacity.objects.filter(resource=resource).values_list(
                        "cluster_id", flat=True
                    )
                ),
                acting_user=acting_user,
                reason=f"resource {resource.name} changed",
            )
        audit_record(
            acting_user=acting_user,
            action="resource.created" if before is None else "resource.changed",
            target=resource,
            before=changes[0],
            after=changes[1],
            comment=comment,
        )
    return resource


def resource_delete_problems(*, resource: Resource) -> list[str]:
    """Why the resource cannot be removed now (empty: it can): clusters that have it."""
    clusters = list(
        ClusterCapacity.objects.filter(resource=resource)
        .order_by("cluster__name")
        .values_list("cluster__name", flat=True)
    )
    if not clusters:
        return []
    return [
        _(
            "resource %(resource)s has a capacity on %(clusters)s: remove it from those "
            "clusters first"
        )
        % {"resource": resource.name, "clusters": ", ".join(clusters)}
    ]


def resource_delete(*, resource: Resource, acting_user: User | None, comment: str = "") -> None:
    """Remove a resource no cluster has (and nothing else refers to): audited."""
    with transaction.atomic():
        locked = lock_resource(resource.pk)
        if locked is None:
            return
        problems = resource_delete_problems(resource=locked)
        if problems:
            raise ValidationFailed(problems[0], field="name")
        before = _resource_state(locked)
        gone = Resource(pk=locked.pk, name=locked.name)  # the audit target
        deleted_or_refused(locked)
        audit_record(
            acting_user=acting_user,
            action="resource.deleted",
            target=gone,
            before=before,
            after=None,
            comment=comment,
        )
