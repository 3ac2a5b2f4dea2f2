"""Reads of sync state for the UI: per cluster, the last run, pending and failed syncs, drift."""

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection
from django.db.models import JSONField, OuterRef, QuerySet, Subquery
from django.utils import timezone
from django.utils.translation import gettext, gettext_noop

from common.sql import db_json, db_moment, in_list
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
    failed syncs with the last error, drift found lately and backend problems. Two queries,
    whatever the number of clusters: the clusters, then their figures."""
    found = list((Cluster.objects.all() if clusters is None else clusters).order_by("name"))
    figures = _sync_figures([cluster.pk for cluster in found], drift_days) if found else {}
    rows = []
    for cluster in found:
        status, started_at, last_error, problems, pending, failed, drift = figures[cluster.pk]
        rows.append(
            ClusterSyncStatus(
                cluster=cluster,
                last_run_status=status,
                last_run_started_at=db_moment(started_at),
                pending=pending,
                failed=failed,
                drift_recent=drift,
                last_error=last_error or "",
                backend_problems=db_json(problems) or [],
            )
        )
    return rows


def _sync_figures(cluster_ids: list[int], drift_days: int) -> dict[int, tuple]:
    """Per cluster id: its last run's status and start (previews left out), the last error of
    its failed syncs, its last finished run's backend problems, its pending and failed syncs
    and its drift of the last ``drift_days``.

    One statement in SQL (the same on PostgreSQL and SQLite): the ORM's took three queries,
    and building its correlated subqueries cost more than running them."""
    tables = {
        "cluster": Cluster._meta.db_table,
        "run": SyncRun._meta.db_table,
        "sync": SyncRequest._meta.db_table,
        "drift": DriftEvent._meta.db_table,
    }
    # The last run of a cluster, previews left out (the same subquery twice: SQLite has no
    # LATERAL join).
    last_run = "FROM {run} r WHERE r.cluster_id = c.id AND r.trigger <> %s".format(**tables)
    sql = """
        SELECT c.id,
            (SELECT r.status {last_run} ORDER BY r.started_at DESC LIMIT 1),
            (SELECT r.started_at {last_run} ORDER BY r.started_at DESC LIMIT 1),
            (SELECT s.last_error FROM {sync} s WHERE s.cluster_id = c.id AND s.status = %s
                ORDER BY s.created_at DESC LIMIT 1),
            (SELECT r.backend_problems {last_run} AND r.status <> %s
                ORDER BY r.started_at DESC LIMIT 1),
            (SELECT COUNT(*) FROM {sync} s WHERE s.cluster_id = c.id AND s.status = %s),
            (SELECT COUNT(*) FROM {sync} s WHERE s.cluster_id = c.id AND s.status = %s),
            (SELECT COUNT(*) FROM {drift} d WHERE d.cluster_id = c.id AND d.detected_at >= %s)
        FROM {cluster} c
        WHERE c.id {ids}
    """.format(**tables, last_run=last_run, ids=in_list(cluster_ids))  # noqa: S608 - the
    # models' table names and placeholders: no value is written in
    preview, running = SyncRun.Trigger.PREVIEW, SyncRun.Status.RUNNING
    pending, failed = SyncRequest.Status.PENDING, SyncRequest.Status.FAILED
    # As the ORM writes a moment for this database (SQLite: its text in UTC).
    since = connection.ops.adapt_datetimefield_value(timezone.now() - timedelta(days=drift_days))
    params = [preview, preview, failed, preview, running, pending, failed, since]
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, *cluster_ids])
        return {row[0]: row[1:] for row in cursor.fetchall()}


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
