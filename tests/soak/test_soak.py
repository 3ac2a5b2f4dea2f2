"""The soak, short: the whole portal on loopback (its own Redis, a throw-away PostgreSQL
database, two sandbox clusters, gunicorn, two Celery workers, beat) under 75 seconds of
simulated leads and admins with every fault kind at least once; it must converge and pass
every end invariant, and clean up after itself."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from soak.run import _server_url
from soak.stack import with_database

ROOT = Path(__file__).resolve().parents[2]
SECONDS = 75


def _postgres_reachable() -> bool:
    try:
        psycopg.connect(with_database(_server_url(), "postgres"), connect_timeout=3).close()
    except psycopg.Error:
        return False
    return True


def _soak_databases() -> set[str]:
    with psycopg.connect(with_database(_server_url(), "postgres"), connect_timeout=3) as conn:
        rows = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'soak_%'")
        return {name for (name,) in rows}


@pytest.fixture
def soak_parts():
    missing = []
    if shutil.which("redis-server") is None:
        missing.append("redis-server")
    if not _postgres_reachable():
        missing.append(f"PostgreSQL at {_server_url()}")
    if missing:
        message = f"the soak needs {' and '.join(missing)}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.mark.ci_only
def test_a_short_soak_with_every_fault_passes_every_invariant(soak_parts, tmp_path):
    databases_before = _soak_databases()
    results = tmp_path / "results.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "soak",
            "--seconds",
            str(SECONDS),
            "--workdir",
            str(tmp_path / "run"),
            "--results",
            str(results),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    report = json.loads(results.read_text())
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert report["ok"] is True
    assert "SOAK PASSED" in done.stdout

    invariants = report["invariants"]
    expected = {
        "applied_as_decided",
        "lifecycle_decided_once",
        "capacity_never_overcommitted",
        "no_request_lost_or_duplicated",
        "cluster_matches_database:soak-kueue",
        "cluster_matches_database:soak-volcano",
        "no_5xx_outside_fault_windows",
        "converged",
        "audit_chain_verified",
        "no_process_died_unasked",
    }
    assert set(invariants) == expected
    assert all(i["ok"] and i["checked"] > 0 for i in invariants.values()), invariants

    # Every kind of fault happened, the worker kill in the middle of a sync.
    assert set(report["faults_by_kind"]) == {
        "db_drop",
        "sandbox_stall",
        "worker_kill",
        "redis_restart",
    }
    assert any(
        f["kind"] == "worker_kill" and "holding a sync lease" in f["detail"]
        for f in report["faults"]
    ), report["faults"]
    assert sum(report["sandbox_faults_fired"].values()) > 0
    # Real traffic went through, decided every way, with retries the faults caused.
    statuses = report["requests_by_status"]
    assert statuses.get("applied", 0) > 0, statuses
    assert report["client"]["retries"] > 0
    assert report["converge_seconds"] is not None

    # Nothing is left behind: no process of the run, no database.
    assert _soak_databases() == databases_before
    assert "results in" in done.stdout
