"""Reads of sync state for the UI: per cluster, the last run, pending and failed syncs, drift."""

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Count, JSONField, OuterRef, Q, Subquery
from django.utils import timezone

from quotas.models import Cluster, DriftEvent, SyncRequest, SyncRun


@dataclass
class ClusterSyncStatus:
    cluster: Cluster
    last_run: SyncRun | None
    pending: int
    failed: int
    drift_recent: int
    last_error: str
    # From discovery in the last run: one message per scheduler the API server does not serve.
    backend_problems: list[dict]

    @property
    def healthy(self) -> bool:
        return self.failed == 0 and (
            self.last_run is None or self.last_run.status != SyncRun.Status.FAILED
        )


def cluster_backend_problems(*, cluster_ids: list[int] | None = None) -> dict[int, list[dict]]:
    """Per cluster, the schedulers its API server did not serve in the last finished sync
    (previews left out); clusters without problems are absent."""
    last = (
        SyncRun.objects.filter(cluster=OuterRef("pk"))
        .exclude(trigger=SyncRun.Trigger.PREVIEW)
        .exclude(status=SyncRun.Status.RUNNING)
        .order_by("-started_at")
        .values("backend_problems")[:1]
    )
    clusters = Cluster.objects.all()
    if cluster_ids is not None:
        clusters = clusters.filter(pk__in=cluster_ids)
    rows = clusters.annotate(problems=Subquery(last, output_field=JSONField())).values_list(
        "pk", "problems"
    )
    return {pk: problems for pk, problems in rows if problems}


def cluster_sync_status(*, drift_days: int = 7) -> list[ClusterSyncStatus]:
    since = timezone.now() - timedelta(days=drift_days)
    clusters = list(Cluster.objects.order_by("name"))
    requests = {
        row["cluster_id"]: row
        for row in SyncRequest.objects.values("cluster_id").annotate(
            pending=Count("id", filter=Q(status=SyncRequest.Status.PENDING)),
            failed=Count("id", filter=Q(status=SyncRequest.Status.FAILED)),
        )
    }
    drift = dict(
        DriftEvent.objects.filter(detected_at__gte=since)
        .values_list("cluster_id")
        .annotate(n=Count("id"))
    )
    problems = cluster_backend_problems()
    rows = []
    for cluster in clusters:
        last_run = (
            SyncRun.objects.filter(cluster=cluster)
            .exclude(trigger=SyncRun.Trigger.PREVIEW)
            .order_by("-started_at")
            .first()
        )
        counts = requests.get(cluster.id, {})
        last_failed = (
            SyncRequest.objects.filter(cluster=cluster, status=SyncRequest.Status.FAILED)
            .order_by("-created_at")
            .values_list("last_error", flat=True)
            .first()
        )
        rows.append(
            ClusterSyncStatus(
                cluster=cluster,
                last_run=last_run,
                pending=counts.get("pending", 0),
                failed=counts.get("failed", 0),
                drift_recent=drift.get(cluster.id, 0),
                last_error=last_failed or "",
                backend_problems=problems.get(cluster.id, []),
            )
        )
    return rows
