"""Why a namespace's work waits, read from its cluster now (quotas.kube.waiting sorts it).

Read outside any database transaction (it calls the clusters); a cluster that cannot be
reached, or that does not serve a kind (no Kueue, no Volcano), is reported or skipped, never
raised. Each namespace costs a handful of LIST calls of that namespace only.
"""

from __future__ import annotations

import logging
from collections import defaultdict

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from quotas.kube import waiting
from quotas.kube.client import KubeClient, KubeError, client_for_cluster, object_path
from quotas.kube.render import KUEUE_API, VOLCANO_API
from quotas.kube.waiting import NamespaceObjects, namespace_waits

log = logging.getLogger(__name__)


def _items(client: KubeClient, api_version: str, kind: str, namespace: str, **query) -> list:
    try:
        result = client.request("GET", object_path(api_version, kind, namespace), query=query)
    except KubeError as exc:
        if exc.status == 404:  # a kind this cluster does not serve
            return []
        raise
    return (result or {}).get("items", [])


def read_namespace_objects(
    client: KubeClient, namespace: str, backends: list[str]
) -> NamespaceObjects:
    """What quotas.kube.waiting needs of one namespace."""
    objects = NamespaceObjects(
        pods=_items(
            client,
            "v1",
            "Pod",
            namespace,
            fieldSelector="status.phase!=Succeeded,status.phase!=Failed",
        ),
        events=_items(client, "v1", "Event", namespace, fieldSelector="type=Warning"),
        jobs=_items(client, "batch/v1", "Job", namespace),
        replica_sets=_items(client, "apps/v1", "ReplicaSet", namespace),
        resource_quotas=_items(client, "v1", "ResourceQuota", namespace),
    )
    if "kueue" in backends:
        objects.workloads = _items(client, KUEUE_API, "Workload", namespace)
        local_queues = {
            (q.get("metadata") or {}).get("name", ""): (q.get("spec") or {}).get("clusterQueue", "")
            for q in _items(client, KUEUE_API, "LocalQueue", namespace)
        }
        objects.local_queues = local_queues
        for name in sorted(set(local_queues.values())):
            queue = client.get(KUEUE_API, "ClusterQueue", "", name) if name else None
            if queue:
                objects.cluster_queues[name] = queue
    if "volcano" in backends:
        objects.pod_groups = _items(client, VOLCANO_API, "PodGroup", namespace)
        # Volcano records "queue resource quota insufficient" as a Normal event.
        objects.events += [
            e
            for e in _items(
                client, "v1", "Event", namespace, fieldSelector="involvedObject.kind=PodGroup"
            )
            if e.get("type") != "Warning"
        ]
    return objects


def waits_of_namespaces(namespaces) -> list[dict]:
    """Per TeamNamespace (cluster selected with it): what waits there and why, or the error
    that kept the portal from reading it."""
    by_cluster = defaultdict(list)
    for ns in namespaces:
        by_cluster[ns.cluster_id].append(ns)
    found: list[dict] = []
    for cluster_namespaces in by_cluster.values():
        cluster = cluster_namespaces[0].cluster
        taken_at = timezone.now().isoformat()
        try:
            client = client_for_cluster(cluster, timeout=settings.KUBE_REQUEST_TIMEOUT)
        except Exception as exc:  # a broken kubeconfig is reported, never raised
            log.warning("waits of cluster %s unavailable: %s", cluster.name, type(exc).__name__)
            error = _("the portal's connection settings of the cluster are unusable")
            found += [
                {"namespace": ns, "waits": [], "error": error, "taken_at": taken_at}
                for ns in cluster_namespaces
            ]
            continue
        try:
            for ns in cluster_namespaces:
                entry = {"namespace": ns, "waits": [], "error": "", "taken_at": taken_at}
                try:
                    objects = read_namespace_objects(client, ns.name, cluster.backends)
                    entry["waits"] = namespace_waits(objects)
                except KubeError as exc:
                    log.warning("waits of %s/%s unavailable: %s", cluster.name, ns.name, exc)
                    entry["error"] = (
                        _("the cluster refused the reading (HTTP %(status)s)")
                        % {"status": exc.status}
                        if exc.status
                        else _("the cluster did not answer")
                    )
                found.append(entry)
        finally:
            client.close()
    return found


# What each reason means, in words a lead acts on (quotas.kube.waiting names the reasons).
REASON_TEXTS = {
    waiting.QUOTA_USED_UP: gettext_lazy(
        "The namespace's quota of %(resource)s is used up: its pods are refused until running"
        " ones end or the cap is raised."
    ),
    waiting.PRIORITY_CLASS_NOT_ALLOWED: gettext_lazy(
        "Its priority class is not allowed for %(resource)s in this namespace: use one the"
        " allocation allows."
    ),
    waiting.REFUSED_BY_POLICY: gettext_lazy(
        "A rule of the namespace refused its pods (the per-pod max or the maximum run time):"
        " see the cluster's words."
    ),
    waiting.NO_NODE_FITS: gettext_lazy(
        "No node has room for it: every node lacks what it asks for (the quota would allow it)."
    ),
    waiting.QUEUE_AT_CAP: gettext_lazy(
        "The queue is at its cap for %(resource)s: it waits until the queue's own work ends, or"
        " for a higher cap."
    ),
    waiting.NOTHING_TO_LEND: gettext_lazy(
        "Within the cap, but beyond the guarantee there is nothing to borrow for %(resource)s:"
        " the other teams use what they are guaranteed."
    ),
    waiting.RECLAIMED: gettext_lazy(
        "Another team is reclaiming its guarantee: this work ran on borrowed GPUs and was stopped"
        " to give them back; it starts again when there is room."
    ),
    waiting.PREEMPTED_BY_PRIORITY: gettext_lazy(
        "Work of a higher priority class in the same queue took its place."
    ),
    waiting.OTHER: gettext_lazy("Waiting; the cluster says why in its own words."),
}


def explanation(wait: waiting.Wait) -> str:
    """The wait's reason in the reader's language, with who holds a used-up quota."""
    text = str(REASON_TEXTS[wait.reason]) % {"resource": wait.resource or _("the resource")}
    if wait.holders:
        held = _(", ").join(f"{h.pod} ({h.amount})" for h in wait.holders)
        text += " " + _("Held by: %(pods)s.") % {"pods": held}
    return text
