"""Benchmark: approve -> applied with a real Celery worker and Redis, p50 / p95 over N
approvals, on clusters of two sizes (how it grows with the cluster).

    python -m bench.bench_apply [--approvals 200] [--namespaces 50,1000]   (or: make bench)

Each approval is a team lead's one-line request (the cap moved by one GPU), submitted and then
approved by a platform admin; the time runs from the admin's approve call to the request's
status reading "applied" in the database, after the worker has synced the cluster (a test API
server in its own process), on data the planner has statistics of (ANALYZE after it is built,
as autovacuum gathers them on a running server). Approvals run one after another, so the
figure is the latency of one approval, not of a queue. The baseline is the round trip of a
no-op task through the same broker and worker, measured in the same run: the least any queued
design pays.

Database: a throw-away PostgreSQL database when BENCH_DATABASE_URL or DATABASE_URL names one,
else SQLite. Broker: BENCH_BROKER_URL, else redis://127.0.0.1:6379/15 (that Redis database is
flushed first); without Redis the benchmark says so and fails.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_sync import _make_cluster, _Server
from bench.common import (
    analyze,
    figure,
    percentile,
    quick,
    setup_django,
    throwaway_database,
    write_figures,
)

ROOT = Path(__file__).resolve().parents[1]
LEADS = 10  # the approvals rotate over this many teams' namespaces
APPLY_TIMEOUT = 120.0


def broker_url() -> str:
    return os.environ.get("BENCH_BROKER_URL") or "redis://127.0.0.1:6379/15"


def _redis_ready(url: str) -> str | None:
    import redis

    try:
        client = redis.Redis.from_url(url, socket_timeout=2)
        client.ping()
        client.flushdb()
        client.close()
    except Exception as exc:  # any failure means: no Redis to measure with
        return str(exc)
    return None


class Worker:
    """`celery -A portal worker --pool solo`, as `make run` starts it, in its own process."""

    def __init__(self, env: dict[str, str], log: Path):
        self.log = log
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "portal",
                "worker",
                "--pool",
                "solo",
                "--without-gossip",
                "--without-mingle",
                "--hostname",
                f"bench-{os.getpid()}@localhost",
                "--loglevel",
                "WARNING",
            ],
            cwd=ROOT,
            env=env,
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def noop_round_trips(count: int) -> list[float]:
    """Send a built-in no-op task and wait for its result, `count` times."""
    from portal.celery import app

    # The first one waits for the worker to be up.
    app.send_task("celery.accumulate", args=(0,)).get(timeout=120)
    times = []
    for i in range(count):
        started = time.perf_counter()
        assert (
            app.send_task("celery.accumulate", args=(i,), kwargs={"index": 0}).get(timeout=30) == i
        )
        times.append(time.perf_counter() - started)
    return times


def build_cluster(namespaces: int, url: str) -> dict:
    """The sync benchmark's cluster of `namespaces` team namespaces (an allocation each),
    synced once, with an approval policy that leaves every change to an admin; the first
    LEADS teams get a lead who asks for the changes."""
    from django.contrib.auth.models import User

    from approvals.models import ApprovalPolicy
    from approvals.policy.clusters import approval_policy_save
    from quotas.kube.sync import cluster_sync
    from quotas.models import Resource, TeamMembership, TeamNamespace
    from quotas.roles import ensure_role_groups, sync_role_permissions

    sync_role_permissions()
    admin_group, _ = ensure_role_groups()
    admin, created = User.objects.get_or_create(username="bench-admin", defaults={"is_staff": True})
    if created:
        admin.groups.add(admin_group)
    cluster = _make_cluster(namespaces, url)
    # Every change waits for the admin: the figure is an admin's approval, not auto-approval.
    approval_policy_save(
        policy=ApprovalPolicy(
            cluster=cluster,
            auto_approve_decreases=False,
            auto_approve_increase_max=0,
            auto_approve_budget=0,
        ),
        acting_user=admin,
    )
    leads = []
    for ns in (
        TeamNamespace.objects.filter(cluster=cluster)
        .select_related("team")
        .order_by("name")[:LEADS]
    ):
        username = f"lead-{ns.team.slug}"
        lead, _ = User.objects.get_or_create(
            username=username, defaults={"email": f"{username}@example.com"}
        )
        TeamMembership.objects.get_or_create(
            team=ns.team, user=lead, defaults={"role": TeamMembership.Role.LEAD}
        )
        leads.append((ns.team, lead, ns))
    run = cluster_sync(cluster_id=cluster.id, trigger="change")
    if run.status != "succeeded":
        raise RuntimeError(f"the first sync of {cluster.name} ended {run.status}")
    analyze()
    gpu = Resource.objects.get(name="nvidia.com/gpu")
    return {"cluster": cluster, "admin": admin, "leads": leads, "gpu": gpu}


def approve_and_wait(world: dict, index: int) -> tuple[float, float, str]:
    """One request: submit as the lead, approve as the admin, wait for "applied"."""
    from approvals.lifecycle import request_approve, request_create
    from approvals.lines import LineInput
    from approvals.models import QuotaRequest
    from quotas.models import Allocation

    team, lead, ns = world["leads"][index % len(world["leads"])]
    current = Allocation.objects.get(team_namespace=ns, resource=world["gpu"])
    cap = 7 if current.cap == 6 else 6
    request = request_create(
        team=team,
        acting_user=lead,
        justification=f"bench approval {index}",
        lines=[LineInput(ns.id, world["gpu"].id, guarantee=2, cap=cap)],
        submit=True,
    )
    started = time.perf_counter()
    request_approve(request=request, acting_user=world["admin"])
    approved = time.perf_counter() - started
    rows = QuotaRequest.objects.filter(pk=request.pk)
    status = ""
    while time.perf_counter() - started < APPLY_TIMEOUT:
        status = rows.values_list("status", flat=True).get()
        if status == QuotaRequest.Status.APPLIED:
            return time.perf_counter() - started, approved, status
        time.sleep(0.002)
    return time.perf_counter() - started, approved, status


def bench_size(namespaces: int, approvals: int, url: str) -> dict:
    started = time.perf_counter()
    world = build_cluster(namespaces, url)
    build = time.perf_counter() - started
    times, calls, late = [], [], []
    for index in range(approvals):
        seconds, call, status = approve_and_wait(world, index)
        if status != "applied":
            late.append((index, status))
        times.append(seconds)
        calls.append(call)
    return {
        "namespaces": namespaces,
        "approvals": approvals,
        "build_seconds": round(build, 2),
        "p50": percentile(times, 50),
        "p95": percentile(times, 95),
        "max": max(times),
        "approve_call_p50": percentile(calls, 50),
        "not_applied": late,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--approvals", type=int, default=30 if quick() else 200)
    parser.add_argument(
        "--namespaces", default="20,200" if quick() else "50,1000", help="cluster sizes"
    )
    args = parser.parse_args()
    sizes = [int(part) for part in args.namespaces.split(",") if part.strip()]
    broker = broker_url()
    problem = _redis_ready(broker)
    if problem:
        print(f"bench_apply: no Redis at {broker} ({problem})", file=sys.stderr)
        return 1

    results = []
    with tempfile.TemporaryDirectory(prefix="bench-apply-") as var_dir:
        os.environ["CELERY_BROKER_URL"] = broker
        os.environ.pop("CELERY_RESULT_BACKEND", None)
        with throwaway_database("bench_apply") as (db_url, database):
            setup_django(db_url, var_dir=var_dir)
            env = dict(os.environ)
            server = _Server()
            worker = Worker(env, Path(var_dir) / "worker.log")
            try:
                noop = noop_round_trips(50 if quick() else 200)
                for size in sizes:
                    results.append(bench_size(size, args.approvals, server.url))
            except Exception:
                print((Path(var_dir) / "worker.log").read_text()[-4000:], file=sys.stderr)
                raise
            finally:
                worker.stop()
                server.stop()

    used = f"{database}, redis"
    base_p50 = percentile(noop, 50)
    base_p95 = percentile(noop, 95)
    label = "no-op task round trip, same broker and worker"
    figures = []
    for result in results:
        n = result["approvals"]
        size = f"{result['namespaces']:,} ns"
        for pct, base in (("p50", base_p50), ("p95", base_p95)):
            figures.append(
                figure(
                    f"approve -> applied, {size}: {pct} of {n}",
                    result[pct] * 1000,
                    "ms",
                    baseline=base * 1000,
                    baseline_label=f"{pct} {label}",
                    database=used,
                    note=f"the approve call itself: p50 {result['approve_call_p50'] * 1000:.1f} ms",
                )
            )
    if len(results) > 1:
        small, large = results[0], results[-1]
        figures.append(
            figure(
                f"approve -> applied p50 growth, {small['namespaces']:,} -> "
                f"{large['namespaces']:,} ns",
                large["p50"] * 1000,
                "ms",
                baseline=small["p50"] * 1000,
                baseline_label=f"p50 at {small['namespaces']:,} ns",
                database=used,
            )
        )
    write_figures(
        "apply",
        figures,
        {"sizes": results, "noop_p50": base_p50, "noop_p95": base_p95, "broker": "redis"},
    )
    late = [f"{r['namespaces']} ns: {r['not_applied']}" for r in results if r["not_applied"]]
    if late:
        print(f"not applied within {APPLY_TIMEOUT:.0f} s: {'; '.join(late)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
