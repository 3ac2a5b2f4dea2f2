"""Benchmark: sync of N team namespaces on one cluster, against the minimal writes done with
plain HTTP in the same run; a re-sync with nothing changed; and the sync after one approval
(one namespace's cap changed), with the result rows it wrote.

    python -m bench.bench_sync [--namespaces 500,5000] [--profile]    (or: make bench)

Runs on a throw-away database (PostgreSQL when BENCH_DATABASE_URL or DATABASE_URL names one,
else SQLite) and test API servers in their own processes. Figures are ratios against the
baseline measured in the same run. With --profile, the first sync runs under cProfile and the
top functions are printed.
"""

import argparse
import atexit
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from bench.common import figure, quick, setup_django, throwaway_database, write_figures

ROOT = Path(__file__).resolve().parents[1]


def _make_cluster(namespaces: int, url: str):
    from decimal import Decimal

    from quotas.models import Cluster, ClusterCapacity, Resource, Team, TeamNamespace
    from quotas.services import allocation_set

    gpu, _ = Resource.objects.get_or_create(
        name="nvidia.com/gpu", defaults={"display_name": "GPU", "kind": "gpu"}
    )
    cluster = Cluster.objects.create(
        name=f"bench-{namespaces}", volcano_enabled=True, sandbox_url=url
    )
    ClusterCapacity.objects.create(cluster=cluster, resource=gpu, capacity=Decimal(namespaces * 8))
    for i in range(namespaces):
        team, _ = Team.objects.get_or_create(slug=f"team-{i:05d}", defaults={"name": f"Team {i}"})
        ns = TeamNamespace.objects.create(team=team, cluster=cluster, name=f"team-{i:05d}-train")
        allocation_set(
            team_namespace=ns, resource=gpu, guarantee=2, cap=6, per_pod_max=4, acting_user=None
        )
    return cluster


def _baseline(objects: list[dict], url: str, field_manager: str) -> dict:
    """The least any client can do for the same writes: one server-side apply per object
    (same bodies, same query) over one keep-alive connection, with plain HTTP."""
    from quotas.kube.client import object_path

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    query = f"?fieldManager={field_manager}&fieldValidation=Strict&force=true"
    started = time.perf_counter()
    for obj in objects:
        meta = obj["metadata"]
        path = object_path(obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"])
        conn.request(
            "PATCH",
            path + query,
            body=json.dumps(obj),
            headers={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"},
        )
        response = conn.getresponse()
        response.read()
        if response.status != 201:
            raise RuntimeError(f"baseline apply {path} answered {response.status}")
    seconds = time.perf_counter() - started
    conn.close()
    return {"requests": len(objects), "writes": len(objects), "seconds": seconds}


class _Server:
    """A test API server in its own process, as a real API server is: in this process its
    threads would share the interpreter lock with the client being measured."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kubesandbox", "--port", str(self.port)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        atexit.register(self.stop)
        deadline = time.monotonic() + 30
        while True:
            try:
                self.stats()
                return
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("the test API server did not start") from None
                time.sleep(0.1)

    def _call(self, method: str, path: str) -> dict:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path)
            return json.loads(conn.getresponse().read())
        finally:
            conn.close()

    def stats(self) -> dict:
        return self._call("GET", "/sandbox/stats")

    def reset_stats(self) -> None:
        self._call("POST", "/sandbox/stats/reset")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


def _measured(server: "_Server", cluster, trigger: str, profile: bool = False) -> dict:
    from quotas.kube.sync import cluster_sync
    from quotas.models import SyncObjectResult

    server.reset_stats()
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    started = time.perf_counter()
    run = cluster_sync(cluster_id=cluster.id, trigger=trigger)
    seconds = time.perf_counter() - started
    if profiler is not None:
        import pstats

        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    stats = server.stats()
    return {
        "requests": stats["requests_total"],
        "writes": stats["writes"],
        "seconds": seconds,
        "status": run.status,
        "counts": run.counts,
        "result_rows": SyncObjectResult.objects.filter(run=run).count(),
    }


def bench_size(namespaces: int, rounds: int, profile: bool) -> dict:
    """Baseline and first sync `rounds` times with fresh servers, then an unchanged re-sync
    and the sync after one approval, all on a cluster of `namespaces` team namespaces."""
    from django.conf import settings

    from quotas.kube.plan import cluster_plan
    from quotas.kube.render import render_cluster
    from quotas.models import Cluster, ManagedObject, Resource, TeamNamespace
    from quotas.services import allocation_set, cluster_sync_request

    cluster = None
    pairs = []
    started = time.perf_counter()
    for round_no in range(rounds):
        # A round: a fresh API server each for the baseline and the portal, the baseline's
        # writes, then the portal's first sync of the same objects. The machine is shared, so
        # the ratio is the median of the rounds, each measured back to back.
        baseline_server = _Server()
        portal_server = _Server()
        try:
            if cluster is None:
                cluster = _make_cluster(namespaces, portal_server.url)
                build_seconds = time.perf_counter() - started
            else:
                ManagedObject.objects.filter(cluster=cluster).delete()
                Cluster.objects.filter(pk=cluster.pk).update(sandbox_url=portal_server.url)
            objects = render_cluster(cluster_plan(cluster))
            baseline = _baseline(objects, baseline_server.url, settings.KUBE_MANAGED_BY)
            last_round = round_no == rounds - 1
            first = _measured(portal_server, cluster, "change", profile=profile and last_round)
            pairs.append((baseline, first))
            if not last_round:
                continue
            again = _measured(portal_server, cluster, "reconcile")
            # One approval: one namespace's cap from 6 to 7, then the sync it asks for.
            ns = TeamNamespace.objects.filter(cluster=cluster).order_by("name").first()
            allocation_set(
                team_namespace=ns,
                resource=Resource.objects.get(name="nvidia.com/gpu"),
                guarantee=2,
                cap=7,
                per_pod_max=4,
                acting_user=None,
            )
            cluster_sync_request(cluster=cluster, acting_user=None, reason="bench")
            change = _measured(portal_server, cluster, "change")
        finally:
            baseline_server.stop()
            portal_server.stop()
    ratios = sorted(first["seconds"] / base["seconds"] for base, first in pairs)
    median_ratio = ratios[len(ratios) // 2]
    baseline, first = min(
        pairs, key=lambda pair: abs(pair[1]["seconds"] / pair[0]["seconds"] - median_ratio)
    )
    problems = []
    if first["status"] != "succeeded":
        problems.append("the first sync did not succeed")
    if again["writes"] != 0:
        problems.append("the re-sync wrote")
    if change["status"] != "succeeded" or change["result_rows"] != change["writes"]:
        problems.append("the change sync failed or recorded rows for unchanged objects")
    return {
        "namespaces": namespaces,
        "objects": len(objects),
        "build_seconds": round(build_seconds, 2),
        "baseline_plain_http": baseline,
        "portal_first_sync": first,
        "portal_resync_unchanged": again,
        "portal_change_sync_one_approval": change,
        "first_sync_time_each_round": ratios,
        "first_sync_time_median": median_ratio,
        "sync_concurrency": settings.SYNC_CONCURRENCY,
        "problems": problems,
    }


def figures_for(result: dict, database: str) -> list[dict]:
    n = result["namespaces"]
    base = result["baseline_plain_http"]
    label = f"plain-HTTP applies, {base['requests']:,} requests"
    rows = []
    for key, title in (
        ("portal_first_sync", "first sync"),
        ("portal_resync_unchanged", "unchanged re-sync"),
        ("portal_change_sync_one_approval", "sync after one approval"),
    ):
        row = result[key]
        note = f"{row['requests']:,} requests, {row['writes']:,} writes"
        if key == "portal_first_sync" and len(result["first_sync_time_each_round"]) > 1:
            rounds = ", ".join(f"{r:.2f}" for r in result["first_sync_time_each_round"])
            note += f"; median ratio of rounds {rounds}"
        fig = figure(
            f"sync {n:,} ns ({result['objects']:,} objects): {title}",
            row["seconds"],
            "s",
            baseline=base["seconds"],
            baseline_label=label,
            database=database,
            note=note,
        )
        if key == "portal_first_sync":
            fig["ratio"] = round(result["first_sync_time_median"], 3)
        rows.append(fig)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--namespaces", default="500", help="comma-separated cluster sizes (default 500)"
    )
    parser.add_argument("--profile", action="store_true", help="profile the last first sync")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1 if quick() else 3,
        help="baseline + first sync pairs for clusters up to 1,000 namespaces; the ratio is "
        "their median (default 3, 1 quick; larger clusters: 1)",
    )
    args = parser.parse_args()
    sizes = [int(part) for part in args.namespaces.split(",") if part.strip()]

    results = []
    with tempfile.TemporaryDirectory() as var_dir:
        for name in ("CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"):
            os.environ.pop(name, None)
        with throwaway_database("bench_sync") as (db_url, database):
            setup_django(db_url, var_dir=var_dir)
            for size in sizes:
                rounds = args.rounds if size <= 1000 else 1
                results.append(bench_size(size, rounds, args.profile))
    figures = [fig for result in results for fig in figures_for(result, database)]
    write_figures("sync", figures, {"sizes": results, "database": database})
    problems = [f"{r['namespaces']} ns: {p}" for r in results for p in r["problems"]]
    if problems:
        print("unexpected: " + "; ".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
