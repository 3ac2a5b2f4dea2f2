"""The sync task on a real worker, and what the reconciler re-drives."""

from datetime import timedelta

import pytest
from celery.contrib.testing.worker import start_worker
from django.db import connection
from django.utils import timezone

from portal.celery import app
from quotas import tasks
from quotas.kube.sync import lease_acquire
from quotas.models import Cluster, SyncRequest, SyncRun
from quotas.services import cluster_sync_request
from tests.support.waiting import poll


@pytest.mark.django_db(transaction=True)
def test_approved_change_reaches_the_cluster_through_a_real_worker(
    kube_sandbox,
    alloc_a,
    admin,
):
    Cluster.objects.filter(pk=alloc_a.team_namespace.cluster_id).update(
        sandbox_url=kube_sandbox.url
    )
    app.loader.import_module("celery.contrib.testing.tasks")
    with start_worker(app, pool="solo", perform_ping_check=True, shutdown_timeout=30):
        # Outside a transaction on_commit fires at once: the task goes to the real broker.
        request = cluster_sync_request(
            cluster=alloc_a.team_namespace.cluster, acting_user=admin, reason="test"
        )
        poll(
            "the worker's sync",
            lambda: SyncRequest.objects.get(pk=request.pk).status != SyncRequest.Status.PENDING,
            60,
            0.05,
        )
        request.refresh_from_db()
    assert request.status == SyncRequest.Status.DONE
    quota = kube_sandbox.get_object("v1", "ResourceQuota", "gpu-quota", "team-a-training")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "10"


@pytest.fixture
def enqueued(monkeypatch):
    """What the reconciler sends to the broker (the broker itself is tested above)."""
    calls = []
    monkeypatch.setattr(tasks.sync_cluster, "delay", lambda *args: calls.append(args))
    return calls


@pytest.mark.django_db
def test_reconciler_checks_never_synced_clusters(cluster, enqueued):
    assert tasks.reconcile_clusters() == [cluster.id]
    assert enqueued == [(cluster.id, SyncRun.Trigger.RECONCILE)]


@pytest.mark.django_db
def test_reconciler_leaves_recently_synced_clusters_alone(cluster, enqueued):
    SyncRun.objects.create(cluster=cluster, trigger="change", mode="enforce", status="succeeded")
    assert tasks.reconcile_clusters() == []


@pytest.mark.django_db
def test_reconciler_redrives_a_lost_pending_sync(cluster, enqueued, settings):
    settings.SYNC_PENDING_REDRIVE_SECONDS = 60
    SyncRun.objects.create(cluster=cluster, trigger="change", mode="enforce", status="succeeded")
    request = SyncRequest.objects.create(cluster=cluster, reason="lost message")
    assert tasks.reconcile_clusters() == []  # too young: its own message may still come
    SyncRequest.objects.filter(pk=request.pk).update(
        created_at=timezone.now() - timedelta(minutes=5)
    )
    assert tasks.reconcile_clusters() == [cluster.id]
    assert enqueued == [(cluster.id, SyncRun.Trigger.CHANGE)]


@pytest.mark.django_db
def test_reconciler_backs_off_before_redriving_a_failed_sync(cluster, enqueued):
    run = SyncRun.objects.create(
        cluster=cluster,
        trigger="change",
        mode="enforce",
        status="failed",
        finished_at=timezone.now(),
    )
    SyncRequest.objects.create(cluster=cluster, status="failed", attempts=3, sync_run=run)
    assert tasks.reconcile_clusters() == []
    SyncRun.objects.filter(pk=run.pk).update(finished_at=timezone.now() - timedelta(hours=2))
    assert tasks.reconcile_clusters() == [cluster.id]


@pytest.mark.django_db
def test_outbox_row_is_written_in_the_callers_transaction(
    cluster, admin, django_capture_on_commit_callbacks, enqueued
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        request = cluster_sync_request(cluster=cluster, acting_user=admin, reason="x")
    assert len(callbacks) == 1
    assert enqueued == [(cluster.id,)]
    assert request.status == SyncRequest.Status.PENDING


@pytest.mark.django_db
def test_an_unreachable_broker_after_the_commit_leaves_the_sync_to_the_reconciler(
    cluster, admin, django_capture_on_commit_callbacks, monkeypatch, caplog, settings
):
    """The change is committed when its sync is queued: a broker down at that moment (a Redis
    restart) is logged, the caller sees no error, and the pending row is re-driven later."""
    from kombu.exceptions import OperationalError

    def broker_down(*args):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(tasks.sync_cluster, "delay", broker_down)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        request = cluster_sync_request(cluster=cluster, acting_user=admin, reason="approved")
    assert len(callbacks) == 1
    assert "could not queue the sync of cluster" in caplog.text
    request.refresh_from_db()
    assert request.status == SyncRequest.Status.PENDING

    enqueued = []
    monkeypatch.setattr(tasks.sync_cluster, "delay", lambda *args: enqueued.append(args))
    SyncRun.objects.create(cluster=cluster, trigger="change", mode="enforce", status="succeeded")
    SyncRequest.objects.filter(pk=request.pk).update(
        created_at=timezone.now() - timedelta(seconds=settings.SYNC_PENDING_REDRIVE_SECONDS + 1)
    )
    assert tasks.reconcile_clusters() == [cluster.id]
    assert enqueued == [(cluster.id, SyncRun.Trigger.CHANGE)]


def _failing_at_the_lease(error: Exception, calls: list):
    """A database fault at the driver: every statement on the sync lease (the first thing a
    sync does) fails with ``error``, seen through Django's execute_wrapper; ``calls`` counts
    the sync attempts."""
    from quotas.models import SyncLease

    table = f'"{SyncLease._meta.db_table}"'

    def fail(execute, sql, params, many, context):
        if table in sql:
            calls.append(sql)
            raise error
        return execute(sql, params, many, context)

    return connection.execute_wrapper(fail)


@pytest.mark.django_db
def test_a_lost_database_connection_is_retried_like_a_transient_api_error(cluster):
    """A database failover cuts the worker's connection mid-sync: the task is retried (with
    backoff; eagerly here), not dropped until the reconciler notices; a bug is not retried.
    The real sync runs each time and meets the fault at the database driver."""
    from django.db import OperationalError

    calls = []
    cut_off = OperationalError("terminating connection due to administrator command")
    with _failing_at_the_lease(cut_off, calls):
        result = tasks.sync_cluster.apply(args=(cluster.id,))
    assert result.successful()  # gave up quietly after the last retry: the reconciler's turn
    assert len(calls) == tasks.SYNC_MAX_RETRIES + 1

    calls.clear()
    with _failing_at_the_lease(ValueError("a bug"), calls):
        assert tasks.sync_cluster.apply(args=(cluster.id,)).failed()
    assert len(calls) == 1


def countdowns_of(task, monkeypatch) -> list:
    """The countdown of each retry the task asks Celery for; the retry itself is not run."""
    from celery.exceptions import Ignore

    asked = []

    def retry(*args, countdown=None, **kwargs):
        asked.append(countdown)
        return Ignore()

    monkeypatch.setattr(task, "retry", retry)
    return asked


@pytest.mark.django_db
def test_a_transient_failure_waits_celerys_jittered_backoff(cluster, monkeypatch):
    """autoretry_for with retry_backoff 2, retry_backoff_max 300 and retry_jitter: retry n
    waits a random whole number of seconds from 0 to 2 * 2**n, at most 300 (full jitter)."""
    from quotas.kube.sync import SyncBusy, TransientSyncError

    for error in (TransientSyncError("HTTP 503"), SyncBusy("lease held")):

        def fail(error=error, **kwargs):
            raise error

        monkeypatch.setattr(tasks, "cluster_sync", fail)
        for retries, ceiling in ((0, 2), (3, 16), (5, 64)):
            asked = countdowns_of(tasks.sync_cluster, monkeypatch)
            for _ in range(40):
                tasks.sync_cluster.apply(args=(cluster.id,), retries=retries)
            assert all(isinstance(c, int) and 0 <= c <= ceiling for c in asked), asked
            assert len(asked) == 40 and len(set(asked)) > 1  # spread: not one fixed wait
    asked = countdowns_of(tasks.sync_cluster, monkeypatch)
    tasks.sync_cluster.apply(args=(cluster.id,), retries=100)  # past the cap: no retry at all
    assert asked == []
    assert [tasks.sync_cluster.retry_backoff_max, tasks.sync_cluster.retry_jitter] == [300, True]


def test_a_failed_sync_is_redriven_after_a_doubled_wait_without_jitter():
    waits = [tasks._redrive_delay(n).total_seconds() for n in (0, 1, 2, 6, 7, 10_000)]
    assert waits == [30, 60, 120, 1920, 3600, 3600]


@pytest.mark.django_db(transaction=True)
def test_two_workers_at_once_one_syncs_the_other_waits(cluster):
    """The lease is taken atomically: from many threads at once exactly one gets it."""
    import threading

    from django.db import connection

    barrier = threading.Barrier(6)
    won = []

    def contend(i: int) -> None:
        barrier.wait()
        try:
            if lease_acquire(cluster.id, f"worker-{i}") is not None:
                won.append(i)
        finally:
            connection.close()

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1


@pytest.mark.django_db
def test_a_lease_taken_over_after_expiry_cannot_be_renewed(cluster):
    from quotas.kube.sync import LeaseLost, lease_renew

    stale = lease_acquire(cluster.id, "slow-worker", ttl=timedelta(seconds=-1))
    fresh = lease_acquire(cluster.id, "new-worker")
    assert fresh == stale + 1  # the epoch is a fencing token
    with pytest.raises(LeaseLost):
        lease_renew(cluster.id, "slow-worker", stale)
    lease_renew(cluster.id, "new-worker", fresh)
