"""Reads of sync state for the UI: per cluster, the last run, pending and failed syncs, drift."""

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, JSONField, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone
from django.utils.translation import gettext, gettext_noop

from quotas.models import Cluster, DriftEvent, SyncRequest, SyncRun


@dataclass
class ClusterSyncStatus:
    cluster: Cluster
    # The last sync run (previews left out): its status (None: never synced) and start.
    last_run_status: str | None
    last_run_started_at: datetime | None
    pending: int
    failed: int
    drift_recent: int
    last_error: str
    # From discovery in the last run: one message per scheduler the API server does not serve.
    backend_problems: list[dict]

    @property
    def healthy(self) -> bool:
        return self.failed == 0 and self.last_run_status != SyncRun.Status.FAILED

    @property
    def last_run_label(self) -> str | None:
        """The last run's status, translated."""
        if self.last_run_status is None:
            return None
        return str(dict(SyncRun.Status.choices).get(self.last_run_status, self.last_run_status))


def _last_problems() -> Subquery:
    """The backend problems of a cluster's last finished sync (previews left out)."""
    last = (
        SyncRun.objects.filter(cluster=OuterRef("pk"))
        .exclude(trigger=SyncRun.Trigger.PREVIEW)
        .exclude(status=SyncRun.Status.RUNNING)
        .order_by("-started_at")
        .values("backend_problems")[:1]
    )
    return Subquery(last, output_field=JSONField())


def cluster_backend_problems(*, cluster_ids: list[int] | None = None) -> dict[int, list[dict]]:
    """Per cluster, the schedulers its API server did not serve in the last finished sync
    (previews left out); clusters without problems are absent."""
    clusters = Cluster.objects.all()
    if cluster_ids is not None:
        clusters = clusters.filter(pk__in=cluster_ids)
    rows = clusters.annotate(problems=_last_problems()).values_list("pk", "problems")
    return {pk: problems for pk, problems in rows if problems}


def cluster_sync_status(
    *, clusters: QuerySet[Cluster] | None = None, drift_days: int = 7
) -> list[ClusterSyncStatus]:
    """Per cluster (all, or those of ``clusters``; by name): its last sync run, pending and
    failed syncs with the last error, drift found lately and backend problems. Three queries,
    whatever the number of clusters."""
    since = timezone.now() - timedelta(days=drift_days)
    last_run = (
        SyncRun.objects.filter(cluster=OuterRef("pk"))
        .exclude(trigger=SyncRun.Trigger.PREVIEW)
        .order_by("-started_at")
    )
    last_failed = (
        SyncRequest.objects.filter(cluster=OuterRef("pk"), status=SyncRequest.Status.FAILED)
        .order_by("-created_at")
        .values("last_error")[:1]
    )
    found = list(
        (Cluster.objects.all() if clusters is None else clusters)
        .order_by("name")
        .annotate(
            last_run_status=Subquery(last_run.values("status")[:1]),
            last_run_started_at=Subquery(last_run.values("started_at")[:1]),
            last_error=Subquery(last_failed),
            problems=_last_problems(),
        )
    )
    ids = [cluster.pk for cluster in found]
    counts = {
        row["cluster_id"]: row
        for row in SyncRequest.objects.filter(cluster_id__in=ids)
        .values("cluster_id")
        .annotate(
            pending=Count("id", filter=Q(status=SyncRequest.Status.PENDING)),
            failed=Count("id", filter=Q(status=SyncRequest.Status.FAILED)),
        )
    }
    drift = dict(
        DriftEvent.objects.filter(detected_at__gte=since, cluster_id__in=ids)
        .values_list("cluster_id")
        .annotate(n=Count("id"))
    )
    rows = []
    for cluster in found:
        of_cluster = counts.get(cluster.id, {})
        rows.append(
            ClusterSyncStatus(
                cluster=cluster,
                last_run_status=cluster.last_run_status,
                last_run_started_at=cluster.last_run_started_at,
                pending=of_cluster.get("pending", 0),
                failed=of_cluster.get("failed", 0),
                drift_recent=drift.get(cluster.id, 0),
                last_error=cluster.last_error or "",
                backend_problems=cluster.problems or [],
            )
        )
    return rows


def recent_drift(*, cluster_ids: list[int] | None = None, limit: int = 20) -> list[dict]:
    """The newest drift found on the clusters (all, or the given ones), newest first: rows of
    detected_at, cluster__name, kind, namespace, name, changes and restored."""
    events = DriftEvent.objects.order_by("-detected_at", "-id")
    if cluster_ids is not None:
        events = events.filter(cluster_id__in=cluster_ids)
    return list(
        events.values(
            "detected_at", "cluster__name", "kind", "namespace", "name", "changes", "restored"
        )[:limit]
    )


def open_sync_requests(*, cluster_ids: list[int], limit: int = 20) -> list[SyncRequest]:
    """Syncs of the clusters still pending or failed (the reconciler retries those), newest
    first."""
    syncs = list(
        SyncRequest.objects.filter(
            cluster_id__in=cluster_ids,
            status__in=(SyncRequest.Status.PENDING, SyncRequest.Status.FAILED),
        )
        .select_related("cluster")
        .order_by("-created_at", "-id")[:limit]
    )
    for sync in syncs:
        sync.reason_text = sync_reason_text(sync.reason)  # in the reader's language
    return syncs


# The reasons the portal writes on a sync (quotas.services, quotas.teams, quotas.clusters,
# approvals), stored in English for the log; shown in the reader's language by these patterns.
_SYNC_REASONS = [
    (re.compile(r"request #(?P<id>\d+)"), gettext_noop("request #%(id)s")),
    (re.compile(r"request #(?P<id>\d+) expired"), gettext_noop("request #%(id)s expired")),
    (
        re.compile(r"temporary request #(?P<id>\d+) ended"),
        gettext_noop("temporary request #%(id)s ended"),
    ),
    (re.compile(r"team (?P<name>\S+) changed"), gettext_noop("team %(name)s changed")),
    (re.compile(r"namespace (?P<name>\S+) changed"), gettext_noop("namespace %(name)s changed")),
    (re.compile(r"namespace (?P<name>\S+) removed"), gettext_noop("namespace %(name)s removed")),
    (re.compile(r"capacity of (?P<name>\S+)"), gettext_noop("capacity of %(name)s")),
    (
        re.compile(r"capacity of (?P<name>\S+) removed"),
        gettext_noop("capacity of %(name)s removed"),
    ),
    (re.compile(r"priority class (?P<name>\S+)"), gettext_noop("priority class %(name)s")),
    (
        re.compile(r"priority class (?P<name>\S+) removed"),
        gettext_noop("priority class %(name)s removed"),
    ),
    (re.compile(r"cluster (?P<name>\S+) settings"), gettext_noop("cluster %(name)s settings")),
    (re.compile(r"resource (?P<name>\S+) changed"), gettext_noop("resource %(name)s changed")),
    (re.compile(r"sync mode (?P<name>\S+)"), gettext_noop("sync mode %(name)s")),
    (re.compile(r"sync now"), gettext_noop("sync now")),
    (
        re.compile(r"maximum run time of (?P<name>\S+) in (?P<namespace>\S+)"),
        gettext_noop("maximum run time of %(name)s in %(namespace)s"),
    ),
    (
        re.compile(r"maximum run time of (?P<name>\S+) in (?P<namespace>\S+) removed"),
        gettext_noop("maximum run time of %(name)s in %(namespace)s removed"),
    ),
]


def sync_reason_text(reason: str) -> str:
    """A sync's stored reason in the active language (a reason of no known shape as stored)."""
    for pattern, msgid in _SYNC_REASONS:
        match = pattern.fullmatch(reason)
        if match:
            return gettext(msgid) % match.groupdict()
    return reason
