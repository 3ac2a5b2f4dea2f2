"""Usage read from a cluster's API: one sample per managed namespace and resource.

Per namespace and resource: units requested by running pods, by pending pods and how long the
oldest of them has waited, pods ended by preemption or eviction since the previous sample, and
what the namespace's Volcano Queue or Kueue ClusterQueue (both named after the namespace)
report as allocated and borrowed.

Evictions are what Kubernetes leaves on the pod: the ``DisruptionTarget`` condition (reasons
``PreemptionByScheduler``, ``EvictionByEvictionAPI``, ``DeletionByTaintManager``,
``TerminationByKubelet``), Kueue's ``TerminationTarget`` condition, or ``status.reason``
``Evicted`` (kubelet under node pressure) or ``Preempting`` (kubelet admitting a critical pod).
A pod deleted and gone between two readings is not seen: Prometheus (kube-state-metrics,
Kueue's ``kueue_evicted_workloads_total``) sees more when it is there.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from kubernetes.utils import parse_quantity

from quotas.kube.client import KubeClient, KubeNotFound, client_for_cluster, object_path
from quotas.kube.pods import pod_amounts
from quotas.kube.render import KUEUE_API, VOLCANO_API
from quotas.models import Allocation, Cluster
from usage.models import UsageSample, UsageSource

log = logging.getLogger(__name__)

EVICTION_CONDITIONS = ("DisruptionTarget", "TerminationTarget")
EVICTION_REASONS = ("Evicted", "Preempting")
PAGE_SIZE = 500


@dataclass
class Reading:
    """What one namespace holds of one resource at the time of reading."""

    allocated: Decimal = Decimal(0)
    pending: Decimal = Decimal(0)
    pending_pods: int = 0
    wait_seconds: int | None = None
    evictions: int = 0
    queue_allocated: Decimal | None = None
    queue_borrowed: Decimal | None = None
    evicted_pods: list[str] = field(default_factory=list)


def _time(value: str | None) -> datetime | None:
    return parse_datetime(value) if value else None


def pending_since(pod: dict) -> datetime | None:
    """When the pod started waiting: its creation, else when it was found unschedulable."""
    created = _time((pod.get("metadata") or {}).get("creationTimestamp"))
    if created:
        return created
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return _time(cond.get("lastTransitionTime"))
    return None


def eviction_time(pod: dict) -> datetime | None:
    """When the pod was preempted or evicted, or None if it was not."""
    status = pod.get("status") or {}
    conditions = status.get("conditions") or []
    for cond in conditions:
        if cond.get("type") in EVICTION_CONDITIONS and cond.get("status") == "True":
            return _time(cond.get("lastTransitionTime")) or timezone.now()
    if status.get("reason") in EVICTION_REASONS:
        times = [_time(c.get("lastTransitionTime")) for c in conditions]
        times = [t for t in times if t]
        meta = pod.get("metadata") or {}
        return (
            max(times, default=None)
            or _time(meta.get("deletionTimestamp"))
            or _time(meta.get("creationTimestamp"))
            or timezone.now()
        )
    return None


def readings_from_pods(
    pods: list[dict],
    wanted: dict[str, list[str]],
    *,
    now: datetime,
    evicted_after: dict[str, datetime],
) -> dict[tuple[str, str], Reading]:
    """Readings per (namespace, resource) for the namespaces in ``wanted`` (namespace ->
    resources) from the cluster's pods. An eviction counts when it happened after
    ``evicted_after[namespace]`` (the previous sample) and not after ``now``."""
    readings = {(ns, r): Reading() for ns, resources in wanted.items() for r in resources}
    for pod in pods:
        meta = pod.get("metadata") or {}
        namespace = meta.get("namespace", "")
        if namespace not in wanted:
            continue
        requested = pod_amounts(pod)
        phase = (pod.get("status") or {}).get("phase", "")
        evicted_at = eviction_time(pod)
        counts_eviction = evicted_at is not None and evicted_after[namespace] < evicted_at <= now
        for resource in wanted[namespace]:
            amount = requested.get(resource, Decimal(0))
            if not amount:
                continue
            reading = readings[(namespace, resource)]
            if counts_eviction:
                reading.evictions += 1
                reading.evicted_pods.append(meta.get("name", ""))
            if phase == "Running":  # a preempted pod still holds its GPUs while it stops
                reading.allocated += amount
            elif phase == "Pending" and not meta.get("deletionTimestamp"):
                reading.pending += amount
                reading.pending_pods += 1
                since = pending_since(pod)
                if since is not None:
                    waited = max(0, int((now - since).total_seconds()))
                    reading.wait_seconds = max(reading.wait_seconds or 0, waited)
    return readings


def _amount(value) -> Decimal:
    return Decimal(parse_quantity(value))


def add_queue_status(
    readings: dict[tuple[str, str], Reading],
    *,
    volcano_queues: list[dict],
    cluster_queues: list[dict],
) -> None:
    """Volcano's ``status.allocated`` and Kueue's ``status.flavorsUsage`` (total and borrowed,
    summed over flavors) of the queue named after each namespace."""
    for queue in volcano_queues:
        name = (queue.get("metadata") or {}).get("name", "")
        allocated = (queue.get("status") or {}).get("allocated") or {}
        for (ns, resource), reading in readings.items():
            if ns == name and resource in allocated:
                reading.queue_allocated = _amount(allocated[resource])
    for queue in cluster_queues:
        name = (queue.get("metadata") or {}).get("name", "")
        totals: dict[str, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
        for flavor in (queue.get("status") or {}).get("flavorsUsage") or []:
            for res in flavor.get("resources") or []:
                totals[res["name"]][0] += _amount(res.get("total", 0))
                totals[res["name"]][1] += _amount(res.get("borrowed", 0))
        for (ns, resource), reading in readings.items():
            if ns == name and resource in totals:
                reading.queue_allocated, reading.queue_borrowed = totals[resource]


def list_pods(client: KubeClient) -> list[dict]:
    """Every pod of the cluster, page by page."""
    pods: list[dict] = []
    query = {"limit": str(PAGE_SIZE)}
    while True:
        page = client.request("GET", object_path("v1", "Pod"), query=query) or {}
        pods += page.get("items", [])
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return pods
        query = {"limit": str(PAGE_SIZE), "continue": token}


def _list_or_empty(client: KubeClient, api_version: str, kind: str) -> list[dict]:
    try:
        return client.list(api_version, kind)
    except KubeNotFound:  # the scheduler is not installed (no such API)
        return []


def usage_collect_cluster(*, cluster: Cluster, now: datetime | None = None) -> int:
    """Read the cluster's pods (and queues) and store one sample per managed namespace and
    resource at ``now``. Raises KubeError when the cluster cannot be read. Returns the number of
    samples written."""
    now = now or timezone.now()
    allocations = Allocation.objects.filter(team_namespace__cluster=cluster).select_related(
        "team_namespace", "resource"
    )
    wanted: dict[str, list[str]] = defaultdict(list)
    ids: dict[tuple[str, str], tuple[int, int]] = {}
    for a in allocations:
        wanted[a.team_namespace.name].append(a.resource.name)
        ids[(a.team_namespace.name, a.resource.name)] = (a.team_namespace_id, a.resource_id)
    if not wanted:
        return 0
    last = dict(
        UsageSample.objects.filter(
            team_namespace__cluster=cluster, source=UsageSource.CLUSTER, timestamp__lt=now
        )
        .values_list("team_namespace__name")
        .annotate(last=Max("timestamp"))
    )
    default_after = now - timedelta(seconds=settings.USAGE_COLLECT_SECONDS)
    evicted_after = {ns: last.get(ns, default_after) for ns in wanted}

    client = client_for_cluster(cluster, timeout=settings.KUBE_REQUEST_TIMEOUT)
    try:
        readings = readings_from_pods(
            list_pods(client), wanted, now=now, evicted_after=evicted_after
        )
        add_queue_status(
            readings,
            volcano_queues=_list_or_empty(client, VOLCANO_API, "Queue")
            if cluster.volcano_enabled
            else [],
            cluster_queues=_list_or_empty(client, KUEUE_API, "ClusterQueue")
            if cluster.kueue_enabled
            else [],
        )
    finally:
        client.close()
    return usage_samples_store(
        readings={ids[key]: reading for key, reading in readings.items()},
        timestamp=now,
        source=UsageSource.CLUSTER,
    )


def usage_samples_store(
    *, readings: dict[tuple[int, int], Reading], timestamp: datetime, source: str
) -> int:
    """Write one sample per (namespace id, resource id); a sample already there for the same
    time and source is replaced (a retried reading never counts twice)."""
    rows = [
        UsageSample(
            team_namespace_id=ns_id,
            resource_id=res_id,
            timestamp=timestamp,
            allocated=r.allocated,
            pending=r.pending,
            pending_pods=r.pending_pods,
            wait_seconds=r.wait_seconds,
            evictions=r.evictions,
            queue_allocated=r.queue_allocated,
            queue_borrowed=r.queue_borrowed,
            source=source,
        )
        for (ns_id, res_id), r in readings.items()
    ]
    with transaction.atomic():
        UsageSample.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["team_namespace", "resource", "timestamp", "source"],
            update_fields=[
                "allocated",
                "pending",
                "pending_pods",
                "wait_seconds",
                "evictions",
                "queue_allocated",
                "queue_borrowed",
            ],
        )
    return len(rows)
