"""Benchmark: sync of N team namespaces on one cluster, against the minimal writes done with
plain HTTP in the same run, and a re-sync with nothing changed.

    python -m bench.bench_sync [--namespaces 500]      (or: make bench)

Runs on a throw-away SQLite database and in-process sandbox API servers; prints a table and
writes var/bench/sync.json. Figures are ratios against the baseline measured in the same run.
"""

import argparse
import http.client
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]


def _setup_django(var_dir: str) -> None:
    os.environ["PORTAL_VAR_DIR"] = var_dir
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"):
        os.environ.pop(name, None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _make_cluster(namespaces: int, url: str):
    from decimal import Decimal

    from quotas.models import Cluster, ClusterCapacity, Resource, Team, TeamNamespace
    from quotas.services import allocation_set

    gpu, _ = Resource.objects.get_or_create(
        name="nvidia.com/gpu", defaults={"display_name": "GPU", "kind": "gpu"}
    )
    cluster = Cluster.objects.create(name="bench", volcano_enabled=True, sandbox_url=url)
    ClusterCapacity.objects.create(cluster=cluster, resource=gpu, capacity=Decimal(namespaces * 8))
    for i in range(namespaces):
        team = Team.objects.create(slug=f"team-{i:04d}", name=f"Team {i}")
        ns = TeamNamespace.objects.create(team=team, cluster=cluster, name=f"team-{i:04d}-train")
        allocation_set(
            team_namespace=ns, resource=gpu, guarantee=2, cap=6, per_pod_max=4, acting_user=None
        )
    return cluster


def _baseline(objects: list[dict], url: str) -> dict:
    """The least any client can do: one POST per object over one keep-alive connection."""
    from quotas.kube.client import object_path

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    started = time.perf_counter()
    for obj in objects:
        meta = obj["metadata"]
        path = object_path(obj["apiVersion"], obj["kind"], meta.get("namespace", ""))
        conn.request(
            "POST", path, body=json.dumps(obj), headers={"Content-Type": "application/json"}
        )
        response = conn.getresponse()
        response.read()
        if response.status != 201:
            raise RuntimeError(f"baseline POST {path} answered {response.status}")
    seconds = time.perf_counter() - started
    conn.close()
    return {"requests": len(objects), "writes": len(objects), "seconds": seconds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespaces", type=int, default=500)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as var_dir:
        _setup_django(var_dir)
        from kubesandbox import SandboxServer
        from quotas.kube.plan import cluster_plan
        from quotas.kube.render import render_cluster
        from quotas.kube.sync import cluster_sync

        baseline_server = SandboxServer(port=0).start()
        portal_server = SandboxServer(port=0).start()
        try:
            cluster = _make_cluster(args.namespaces, portal_server.url)
            objects = render_cluster(cluster_plan(cluster))
            baseline = _baseline(objects, baseline_server.url)

            def measured(trigger: str) -> dict:
                portal_server.stats.reset()
                started = time.perf_counter()
                run = cluster_sync(cluster_id=cluster.id, trigger=trigger)
                seconds = time.perf_counter() - started
                stats = portal_server.stats.as_dict()
                return {
                    "requests": stats["requests_total"],
                    "writes": stats["writes"],
                    "seconds": seconds,
                    "status": run.status,
                    "counts": run.counts,
                }

            first = measured("manual")
            again = measured("reconcile")
        finally:
            baseline_server.stop()
            portal_server.stop()

    result = {
        "namespaces": args.namespaces,
        "objects": len(objects),
        "baseline_plain_http": baseline,
        "portal_first_sync": first,
        "portal_resync_unchanged": again,
        "ratios": {
            "first_sync_requests": first["requests"] / baseline["requests"],
            "first_sync_time": first["seconds"] / baseline["seconds"],
            "resync_requests": again["requests"] / baseline["requests"],
            "resync_time": again["seconds"] / baseline["seconds"],
        },
    }
    out = ROOT / "var" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "sync.json").write_text(json.dumps(result, indent=2, default=str))
    rows = [
        ("baseline: plain HTTP POSTs", baseline),
        ("portal: first sync", first),
        ("portal: re-sync, nothing changed", again),
    ]
    print(f"sync of {args.namespaces} team namespaces ({len(objects)} objects) on one cluster")
    print(f"{'':36} {'requests':>9} {'writes':>7} {'seconds':>8} {'x req':>6} {'x time':>7}")
    for label, row in rows:
        print(
            f"{label:36} {row['requests']:>9} {row['writes']:>7} {row['seconds']:>8.2f} "
            f"{row['requests'] / baseline['requests']:>6.2f} "
            f"{row['seconds'] / baseline['seconds']:>7.2f}"
        )
    if first["status"] != "succeeded" or again["writes"] != 0:
        print("unexpected: first sync did not succeed or the re-sync wrote", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
