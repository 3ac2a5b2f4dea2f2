"""Celery tasks of quotas: thin interfaces over the sync service."""

import logging
from datetime import timedelta

from celery import shared_task
from celery.utils.time import get_exponential_backoff_interval
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.db.models import Max, Q
from django.utils import timezone

from quotas.kube.sync import SyncBusy, TransientSyncError, cluster_sync
from quotas.models import Cluster, SyncRequest, SyncRun

log = logging.getLogger(__name__)

SYNC_MAX_RETRIES = 6
# Celery's exponential backoff with full jitter: retry n waits a random whole number of seconds
# up to 2 * 2**n, at most 300, so syncs that failed together do not retry together.
SYNC_BACKOFF_BASE = 2
SYNC_BACKOFF_MAX = 300
# A sync that failed is re-driven by the reconciler after 30 s, doubled per failed attempt.
REDRIVE_BACKOFF_BASE = 30
REDRIVE_BACKOFF_MAX = 3600


@shared_task(
    bind=True,
    name="quotas.sync_cluster",
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=SYNC_MAX_RETRIES,
    ignore_result=True,
    autoretry_for=(SyncBusy, TransientSyncError, OperationalError, InterfaceError),
    retry_backoff=SYNC_BACKOFF_BASE,
    retry_backoff_max=SYNC_BACKOFF_MAX,
    retry_jitter=True,
)
def sync_cluster(self, cluster_id: int, trigger: str = SyncRun.Trigger.CHANGE) -> None:
    """Sync one cluster; retried by Celery with backoff (autoretry_for) on a busy lease,
    transient API errors and a lost database connection."""
    if not Cluster.objects.filter(pk=cluster_id).exists():
        return
    try:
        cluster_sync(cluster_id=cluster_id, trigger=trigger, worker=self.request.hostname or "")
    except SyncBusy:
        if self.request.retries >= self.max_retries:
            # Still busy: the reconciler finds the pending sync and runs it later.
            return
        # The running sync may have read the plan before our change: run again after it.
        raise
    except (TransientSyncError, OperationalError, InterfaceError):
        # 429, 5xx, timeouts, lost connections of the API server; or of the database (a
        # failover, a restart), which the worker reconnects to for the retry.
        if self.request.retries >= self.max_retries:
            # The run is recorded as failed and its requests stay visible as failed; the
            # reconciler re-drives them later.
            log.warning("sync of cluster %s gave up after %s tries", cluster_id, self.max_retries)
            return
        raise


@shared_task(name="quotas.reconcile_clusters", ignore_result=True)
def reconcile_clusters() -> list[int]:
    """Re-drive pending and failed syncs, and check every cluster for drift periodically."""
    now = timezone.now()
    lost_after = timedelta(seconds=settings.SYNC_PENDING_REDRIVE_SECONDS)
    drift_every = timedelta(seconds=settings.SYNC_RECONCILE_SECONDS)
    started = []
    last_runs = dict(
        SyncRun.objects.exclude(trigger=SyncRun.Trigger.PREVIEW)
        .values_list("cluster_id")
        .annotate(last=Max("started_at"))
    )
    for cluster_id in Cluster.objects.values_list("id", flat=True):
        waiting = SyncRequest.objects.filter(cluster_id=cluster_id).filter(
            Q(status=SyncRequest.Status.PENDING, created_at__lt=now - lost_after)
            | Q(status=SyncRequest.Status.FAILED)
        )
        failed_backoff = any(
            r.status == SyncRequest.Status.FAILED
            and r.sync_run_id
            and r.sync_run.finished_at
            and r.sync_run.finished_at > now - _redrive_delay(r.attempts)
            for r in waiting.select_related("sync_run")[:20]
        )
        last = last_runs.get(cluster_id)
        if waiting.exists() and not failed_backoff:
            sync_cluster.delay(cluster_id, SyncRun.Trigger.CHANGE)
            started.append(cluster_id)
        elif last is None or last < now - drift_every:
            sync_cluster.delay(cluster_id, SyncRun.Trigger.RECONCILE)
            started.append(cluster_id)
    return started


def _redrive_delay(attempts: int) -> timedelta:
    # Celery's backoff without jitter: the reconciler asks "is it time yet?" at each beat,
    # which spreads the retries.
    return timedelta(
        seconds=get_exponential_backoff_interval(
            factor=REDRIVE_BACKOFF_BASE, retries=attempts, maximum=REDRIVE_BACKOFF_MAX
        )
    )


@shared_task(name="quotas.anchor_audit_log", ignore_result=True)
def anchor_audit_log() -> None:
    """Write the audit log's head outside the database (AUDIT_ANCHOR_FILE and the log stream)."""
    from quotas.audit.anchors import audit_anchor_write

    audit_anchor_write(reason="beat")
