"""Reads what the end invariants check: requests, allocation versions and audit events from the
soak database (the harness runs Django on it), and the objects the sandbox clusters hold, read
over their HTTP API with the official client's token scheme, not through the portal's sync."""

from __future__ import annotations

import re
from collections import defaultdict
from decimal import Decimal

import requests

from soak.actors import MARKER
from soak.invariants import (
    GuaranteeChange,
    LineFacts,
    RequestEvent,
    RequestFacts,
    VersionFacts,
)

MARKER_RE = re.compile(re.escape(MARKER) + r"(op-\d+)")


def _values(guarantee, cap, per_pod_max, classes) -> tuple:
    return (
        Decimal(guarantee).normalize(),
        Decimal(cap).normalize(),
        None if per_pod_max is None else Decimal(per_pod_max).normalize(),
        tuple(sorted(classes or ())),
    )


def requests_facts() -> list[RequestFacts]:
    from django.utils import timezone

    from approvals.models import QuotaRequest

    now = timezone.now()
    facts = []
    for request in QuotaRequest.objects.prefetch_related(
        "lines__team_namespace__cluster", "lines__resource"
    ).order_by("id"):
        marker = MARKER_RE.search(request.justification)
        lines = tuple(
            LineFacts(
                namespace=f"{line.team_namespace.cluster.name}/{line.team_namespace.name}",
                resource=line.resource.name,
                final=_values(
                    line.final_guarantee,
                    line.final_cap,
                    line.final_per_pod_max,
                    line.final_priority_classes,
                ),
                applied_version=line.applied_version,
            )
            for line in request.lines.all()
        )
        facts.append(
            RequestFacts(
                id=request.pk,
                status=request.status,
                kind=request.kind,
                op_id=marker.group(1) if marker else "",
                starts_later=bool(
                    request.is_temporary and request.starts_at and request.starts_at > now
                ),
                grant_start_failed=any(f.get("rule") == "grant_start" for f in request.findings),
                lines=lines,
            )
        )
    return facts


def versions_facts() -> list[VersionFacts]:
    from quotas.models import AllocationVersion

    return [
        VersionFacts(
            namespace=f"{v.allocation.team_namespace.cluster.name}/{v.allocation.team_namespace.name}",
            resource=v.allocation.resource.name,
            version=v.version,
            values=_values(v.guarantee, v.cap, v.per_pod_max, v.priority_classes),
            source=v.source,
        )
        for v in AllocationVersion.objects.select_related(
            "allocation__team_namespace__cluster", "allocation__resource"
        )
    ]


def request_events() -> dict[int, list[RequestEvent]]:
    from approvals.models import QuotaRequest
    from quotas.models import AuditEvent

    events: dict[int, list[RequestEvent]] = defaultdict(list)
    for seq, action, target_id, before, after in AuditEvent.objects.filter(
        target_type=QuotaRequest.__name__, action__startswith="request."
    ).values_list("seq", "action", "target_id", "before", "after"):
        events[int(target_id)].append(
            RequestEvent(
                seq=seq,
                action=action,
                before_status=(before or {}).get("status"),
                after_status=(after or {}).get("status"),
            )
        )
    return events


def guarantee_changes() -> list[GuaranteeChange]:
    """Every allocation change in audit order, grouped by the change it is part of.

    A transaction's audit events are consecutive (appenders hold the chain head until they
    commit), and the lines of one request are applied (or reverted) one after the other with
    one comment: a run of consecutive events with the same comment is one change."""
    from quotas.models import AuditEvent

    rows = AuditEvent.objects.filter(action="allocation.changed").order_by("seq")
    changes = []
    group, last_seq, last_comment = 0, None, None
    for seq, comment, after in rows.values_list("seq", "comment", "after"):
        if last_seq is None or seq != last_seq + 1 or comment != last_comment:
            group += 1
        last_seq, last_comment = seq, comment
        after = after if isinstance(after, dict) else {}
        changes.append(
            GuaranteeChange(
                seq=seq,
                group=str(group),
                cluster=after.get("cluster", ""),
                namespace=after.get("namespace", ""),
                resource=after.get("resource", ""),
                guarantee=Decimal(str(after.get("guarantee", "0"))),
            )
        )
    return changes


def capacities() -> dict[tuple[str, str], Decimal]:
    from quotas.models import ClusterCapacity

    return {
        (c.cluster.name, c.resource.name): c.capacity
        for c in ClusterCapacity.objects.select_related("cluster", "resource")
    }


def guaranteed_now() -> dict[tuple[str, str], Decimal]:
    from django.db.models import Sum

    from quotas.models import Allocation

    rows = Allocation.objects.values_list(
        "team_namespace__cluster__name", "resource__name"
    ).annotate(total=Sum("guarantee"))
    return {(cluster, resource): total for cluster, resource, total in rows}


def unfinished_syncs() -> list[str]:
    from quotas.models import SyncRequest

    return [
        f"{s.cluster.name} #{s.pk} {s.status} (attempts {s.attempts}): {s.last_error[:200]}"
        for s in SyncRequest.objects.exclude(status=SyncRequest.Status.DONE).select_related(
            "cluster"
        )
    ]


def running_runs(*, older_than: float) -> list[str]:
    """Sync runs still "running" that started more than ``older_than`` seconds ago (a live
    sync renews its lease far more often: these were left by a worker that died)."""
    from datetime import timedelta

    from django.utils import timezone

    from quotas.models import SyncRun

    since = timezone.now() - timedelta(seconds=older_than)
    return [
        f"{r.cluster.name} run #{r.pk} ({r.trigger}, started {r.started_at:%H:%M:%S}, "
        f"worker {r.worker or '?'})"
        for r in SyncRun.objects.filter(
            status=SyncRun.Status.RUNNING, started_at__lt=since
        ).select_related("cluster")
    ]


def lease_holders() -> list[str]:
    """Holders of unexpired sync leases (``<worker hostname>:<pid>:<id>``)."""
    from django.utils import timezone

    from quotas.models import SyncLease

    return list(
        SyncLease.objects.filter(expires_at__gt=timezone.now())
        .exclude(holder="")
        .values_list("holder", flat=True)
    )


def desired_objects() -> dict[str, tuple[str, list[dict]]]:
    """Per cluster: its sandbox URL and the objects the portal's render code makes of the
    database's plan now."""
    from quotas.kube.plan import cluster_plan
    from quotas.kube.render import render_cluster
    from quotas.models import Cluster

    return {
        cluster.name: (cluster.sandbox_url, render_cluster(cluster_plan(cluster)))
        for cluster in Cluster.objects.order_by("name")
    }


def live_objects(url: str, token: str, managed_by: str, cluster: str) -> dict[tuple, dict]:
    """Every object of the kinds the portal manages that carries its labels, by key."""
    from quotas.kube.client import KINDS
    from quotas.kube.objects import ObjectKey
    from quotas.kube.render import CLUSTER_LABEL, MANAGED_BY_LABEL

    selector = f"{MANAGED_BY_LABEL}={managed_by},{CLUSTER_LABEL}={cluster}"
    live = {}
    with requests.Session() as session:
        session.headers["Authorization"] = f"Bearer {token}"
        for (api_version, kind), info in KINDS.items():
            if kind == "Pod":
                continue
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            answer = session.get(
                f"{url}{base}/{info.plural}", params={"labelSelector": selector}, timeout=30
            )
            if answer.status_code == 404:
                continue
            answer.raise_for_status()
            for item in answer.json().get("items", []):
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
                live[ObjectKey.of(item)] = item
    return live
