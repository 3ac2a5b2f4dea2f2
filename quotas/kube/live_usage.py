"""What a team uses right now, read from its clusters: requests of running and pending pods.

Read outside any database transaction (it calls the clusters); a cluster that cannot be
reached is reported as such, never raised, so a request can still be submitted.
"""

import logging
from collections import defaultdict
from decimal import Decimal

from django.conf import settings
from django.utils import timezone

from common.amounts import format_amount
from quotas.kube.client import KubeClient, KubeError, client_for_cluster, object_path
from quotas.kube.pods import pod_amounts

log = logging.getLogger(__name__)


def namespace_usage(
    client: KubeClient, namespace: str, resources: list[str]
) -> dict[str, dict[str, str]]:
    """Per resource: requested by running pods, by pending pods, and the pending pod count."""
    path = object_path("v1", "Pod", namespace)
    usage = {
        r: {"running": Decimal(0), "pending": Decimal(0), "pending_pods": 0} for r in resources
    }
    for phase, key in (("Running", "running"), ("Pending", "pending")):
        result = client.request("GET", path, query={"fieldSelector": f"status.phase={phase}"})
        for pod in (result or {}).get("items", []):
            requested = pod_amounts(pod)
            for resource in resources:
                amount = requested.get(resource, Decimal(0))
                usage[resource][key] += amount
                if key == "pending" and amount:
                    usage[resource]["pending_pods"] += 1
    return {
        r: {k: (format_amount(v) if isinstance(v, Decimal) else v) for k, v in u.items()}
        for r, u in usage.items()
    }


def team_usage_now(team) -> dict:
    """Usage of every namespace of the team, cluster by cluster; errors are reported inline."""
    from quotas.models import Allocation, TeamNamespace

    namespaces = TeamNamespace.objects.filter(team=team).select_related("cluster")
    by_cluster: dict[int, list] = defaultdict(list)
    for ns in namespaces:
        by_cluster[ns.cluster_id].append(ns)
    snapshot: dict = {"taken_at": timezone.now().isoformat(), "namespaces": []}
    for cluster_namespaces in by_cluster.values():
        cluster = cluster_namespaces[0].cluster
        try:
            client = client_for_cluster(cluster, timeout=settings.KUBE_REQUEST_TIMEOUT)
        except Exception as exc:  # a broken kubeconfig must not block a request
            snapshot["namespaces"] += [
                {"cluster": cluster.name, "namespace": ns.name, "error": type(exc).__name__}
                for ns in cluster_namespaces
            ]
            continue
        try:
            for ns in cluster_namespaces:
                resources = sorted(
                    Allocation.objects.filter(team_namespace=ns).values_list(
                        "resource__name", flat=True
                    )
                )
                entry = {"cluster": cluster.name, "namespace": ns.name}
                try:
                    entry["usage"] = namespace_usage(client, ns.name, resources)
                except KubeError as exc:
                    log.warning("usage of %s/%s unavailable: %s", cluster.name, ns.name, exc)
                    entry["error"] = f"cluster unreachable or refused ({exc.status or 'no answer'})"
                snapshot["namespaces"].append(entry)
        finally:
            client.close()
    return snapshot
