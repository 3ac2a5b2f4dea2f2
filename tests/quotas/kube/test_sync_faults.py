"""Convergence under faults: 30% of writes fail (429, 500, timeouts), a worker is killed
mid-sync, the allocations change meanwhile; every approved allocation still reaches the
cluster, and no object is ever written with an older generation after a newer one."""

import os
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from kubesandbox import WRITE_METHODS
from quotas.kube.render import GENERATION_ANNOTATION
from quotas.models import (
    Allocation,
    Cluster,
    ClusterCapacity,
    SyncRequest,
    SyncRun,
    Team,
    TeamNamespace,
)
from quotas.services import allocation_set, cluster_sync_request
from quotas.tasks import reconcile_clusters

ROOT = Path(__file__).resolve().parents[3]
NAMESPACES = 24


def _database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or "postgres"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return (
        f"postgres://{user}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    )


def _start_worker(tmp_path: Path, name: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "DATABASE_URL": _database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "CELERY_BROKER_FOLDER": str(settings.CELERY_BROKER_FOLDER),
        "SYNC_LEASE_SECONDS": "4",
        "KUBE_REQUEST_TIMEOUT": "1",
        "PORTAL_VAR_DIR": str(tmp_path),
    }
    if settings.CELERY_RESULT_BACKEND:
        env["CELERY_RESULT_BACKEND"] = settings.CELERY_RESULT_BACKEND
    log = (tmp_path / f"{name}.log").open("w")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "portal",
            "worker",
            "--pool",
            "solo",
            "--hostname",
            f"{name}@%h",
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "INFO",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _stop(proc: subprocess.Popen, sig=signal.SIGTERM) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _converged(kube_sandbox, cluster) -> bool:
    for a in Allocation.objects.filter(team_namespace__cluster=cluster).select_related(
        "team_namespace"
    ):
        ns = a.team_namespace.name
        quota = kube_sandbox.get_object("v1", "ResourceQuota", "gpu-quota", ns)
        queue = kube_sandbox.get_object("scheduling.volcano.sh/v1beta1", "Queue", ns)
        if quota is None or queue is None:
            return False
        if Decimal(quota["spec"]["hard"]["requests.nvidia.com/gpu"]) != a.cap:
            return False
        if Decimal(queue["spec"]["deserved"]["nvidia.com/gpu"]) != a.guarantee:
            return False
    return not SyncRequest.objects.filter(cluster=cluster).exclude(status="done").exists()


def _finished_runs(cluster) -> int:
    return SyncRun.objects.filter(cluster=cluster).exclude(status=SyncRun.Status.RUNNING).count()


def _until(condition, seconds: float, log: Path) -> None:
    """Until ``condition()`` holds, asked every 50 ms; fails with the worker's log after
    ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.05)


@pytest.mark.django_db(transaction=True)
def test_allocations_converge_through_faults_and_a_killed_worker(
    kube_sandbox, tmp_path, gpu, admin, settings
):
    settings.SYNC_PENDING_REDRIVE_SECONDS = 1
    cluster = Cluster.objects.create(
        name="faulty", volcano_enabled=True, sandbox_url=kube_sandbox.url
    )
    ClusterCapacity.objects.create(cluster=cluster, resource=gpu, capacity=Decimal(1000))
    namespaces = []
    for i in range(NAMESPACES):
        team = Team.objects.create(slug=f"team-{i:02d}", name=f"Team {i}")
        ns = TeamNamespace.objects.create(team=team, cluster=cluster, name=f"team-{i:02d}-train")
        allocation_set(team_namespace=ns, resource=gpu, guarantee=2, cap=4, acting_user=admin)
        namespaces.append(ns)
    # 30% of writes fail: 10% 429, 10% 500, 10% hang past the client's 1 s timeout.
    for kind, status, seed in (("status", 429, 1), ("status", 500, 2), ("timeout", None, 3)):
        kube_sandbox.faults.add(
            kind,
            ratio=0.1,
            methods=WRITE_METHODS,
            status=status,
            seconds=2.5 if kind == "timeout" else None,
            seed=seed,
        )

    first = _start_worker(tmp_path, "first")
    second = None
    try:
        cluster_sync_request(cluster=cluster, acting_user=admin, reason="initial")
        _until(lambda: kube_sandbox.stats.writes >= 15, 120, tmp_path / "first.log")
        _stop(first, signal.SIGKILL)  # killed mid-sync, holding the lease
        written_before_kill = kube_sandbox.stats.writes
        assert written_before_kill < NAMESPACES * 4, "the first worker finished before the kill"
        # Newer approved values while nothing is running: they must win.
        for ns in namespaces[::2]:
            allocation_set(team_namespace=ns, resource=gpu, guarantee=3, cap=6, acting_user=admin)
        cluster_sync_request(cluster=cluster, acting_user=admin, reason="newer")
        second = _start_worker(tmp_path, "second")
        # Until converged; each time the worker finishes a run short of it, what beat does
        # every minute asks for the next one.
        deadline = time.monotonic() + 240
        while not _converged(kube_sandbox, cluster):
            finished = _finished_runs(cluster)
            reconcile_clusters()
            _until(
                lambda n=finished: _finished_runs(cluster) > n or _converged(kube_sandbox, cluster),
                deadline - time.monotonic(),
                tmp_path / "second.log",
            )
    finally:
        _stop(first, signal.SIGKILL)
        if second is not None:
            _stop(second)

    faults_fired = kube_sandbox.stats.faults_injected
    assert faults_fired >= 5, "the faults did not fire: the test proves nothing"
    # Some runs failed on the injected faults and were retried until everything converged.
    assert SyncRun.objects.filter(cluster=cluster, status=SyncRun.Status.FAILED).exists()
    # No object was ever written with an older generation after a newer one.
    last: dict[tuple, int] = {}
    for entry in kube_sandbox.write_log:
        if entry["method"] == "DELETE":
            continue
        generation = entry["annotations"].get(GENERATION_ANNOTATION)
        if generation is None:
            continue
        key = (entry["kind"], entry["namespace"], entry["name"])
        assert int(generation) >= last.get(key, -1), f"{key} went back to generation {generation}"
        last[key] = int(generation)
