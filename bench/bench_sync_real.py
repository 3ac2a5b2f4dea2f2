"""Benchmark: the portal's first sync of N team namespaces on the real control plane, against
`kubectl apply --server-side` of the same objects on the same API server, in the same run.

    python -m bench.bench_sync_real [--namespaces 5000]     (BENCH_QUICK=1: 100)

The control plane is the one `make controlplane` builds (etcd, kube-apiserver, controllers,
kwok's nodes and Volcano with its admission webhooks; Kueue is left out, as on a Volcano
cluster). Two clusters of the portal point at it, each with N team namespaces of its own (its
own teams): kubectl applies the one's objects as `export_manifests` writes them (one file,
the portal's field manager, the kinds the server serves; without the few cluster-wide
admission policies, which have one name on every cluster and are left to the portal), then the
portal syncs the other (cluster_sync, its first sync: reads, then server-side applies, with
SYNC_CONCURRENCY requests in flight). Then each again with nothing changed: kubectl applies
the same file a second time, the portal runs its reconcile (reads everything, writes nothing).

Figures: the portal's first sync and unchanged re-sync, each with kubectl's time for the same
step as baseline. Without the built control plane the benchmark says it is skipped.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

from bench.common import (
    figure,
    quick,
    setup_django,
    throwaway_database,
    write_figures,
    write_skipped,
)

NAME = "sync-real"


def _make_cluster(prefix: str, namespaces: int, kubeconfig: Path):
    from quotas.models import Cluster, ClusterCapacity, Resource, Team, TeamNamespace
    from quotas.services import allocation_set

    gpu, _ = Resource.objects.get_or_create(
        name="nvidia.com/gpu", defaults={"display_name": "GPU", "kind": "gpu"}
    )
    cluster = Cluster.objects.create(
        name=f"bench-{prefix}",
        volcano_enabled=True,
        connection=Cluster.Connection.KUBECONFIG,
        kubeconfig_path=str(kubeconfig),
        kubeconfig_context="controlplane",
    )
    ClusterCapacity.objects.create(cluster=cluster, resource=gpu, capacity=Decimal(namespaces * 8))
    for i in range(namespaces):
        slug = f"{prefix}-{i:05d}"
        team = Team.objects.create(slug=slug, name=f"Team {prefix} {i}")
        ns = TeamNamespace.objects.create(team=team, cluster=cluster, name=f"{slug}-train")
        allocation_set(
            team_namespace=ns, resource=gpu, guarantee=2, cap=6, per_pod_max=4, acting_user=None
        )
    return cluster


def _served_objects(cluster) -> list[dict]:
    """What the portal's sync writes to the cluster: its plan, rendered for the APIs served."""
    from django.conf import settings

    from quotas.kube.client import client_for_cluster
    from quotas.kube.plan import cluster_plan
    from quotas.kube.render import render_cluster
    from quotas.kube.sync import with_served_apis

    client = client_for_cluster(cluster, timeout=settings.KUBE_REQUEST_TIMEOUT)
    try:
        return render_cluster(with_served_apis(cluster_plan(cluster), client))
    finally:
        client.close()


def _kubectl_apply(kubeconfig: Path, manifests: Path) -> dict:
    from django.conf import settings

    from controlplane.launcher import kubectl_binary

    argv = [
        kubectl_binary(),
        f"--kubeconfig={kubeconfig}",
        "apply",
        "--server-side",
        "--force-conflicts",
        f"--field-manager={settings.KUBE_MANAGED_BY}",
        "-f",
        str(manifests),
    ]
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl apply failed: {proc.stderr.strip()[-2000:]}")
    applied = sum(1 for line in proc.stdout.splitlines() if line.endswith("serverside-applied"))
    return {"seconds": seconds, "applied": applied}


def _portal_sync(cluster, trigger: str) -> dict:
    from quotas.kube.sync import cluster_sync

    started = time.perf_counter()
    run = cluster_sync(cluster_id=cluster.id, trigger=trigger)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "status": run.status, "counts": run.counts}


def bench(namespaces: int, workdir: Path) -> dict:
    from django.conf import settings

    from controlplane.launcher import ControlPlane
    from quotas.kube.objects import ObjectKey
    from quotas.management.commands.export_manifests import manifests_yaml

    with ControlPlane(workdir / "controlplane", kueue=False) as cp:
        started = time.perf_counter()
        by_kubectl = _make_cluster("k", namespaces, cp.kubeconfig)
        by_portal = _make_cluster("p", namespaces, cp.kubeconfig)
        build_seconds = time.perf_counter() - started
        # The cluster-wide admission policies have one name on any cluster: those are the
        # portal's alone here, so the two never write one object.
        portal_keys = {ObjectKey.of(o) for o in _served_objects(by_portal)}
        rendered = _served_objects(by_kubectl)
        objects = [o for o in rendered if ObjectKey.of(o) not in portal_keys]
        manifests = workdir / "manifests.yaml"
        manifests.write_text(manifests_yaml(objects))
        kubectl_first = _kubectl_apply(cp.kubeconfig, manifests)
        portal_first = _portal_sync(by_portal, "change")
        kubectl_again = _kubectl_apply(cp.kubeconfig, manifests)
        portal_again = _portal_sync(by_portal, "reconcile")
    problems = []
    if kubectl_first["applied"] != len(objects):
        problems.append(f"kubectl applied {kubectl_first['applied']} of {len(objects)} objects")
    if portal_first["status"] != "succeeded":
        problems.append(f"the portal's first sync {portal_first['status']}")
    if portal_again["status"] != "succeeded" or set(portal_again["counts"]) - {"unchanged"}:
        problems.append(f"the unchanged re-sync did more: {portal_again['counts']}")
    return {
        "namespaces": namespaces,
        "objects": len(portal_keys),
        "kubectl_objects": len(objects),
        "left_out_of_kubectl": len(rendered) - len(objects),
        "build_seconds": round(build_seconds, 1),
        "kubectl_first_apply": kubectl_first,
        "portal_first_sync": portal_first,
        "kubectl_unchanged_apply": kubectl_again,
        "portal_unchanged_resync": portal_again,
        "sync_concurrency": settings.SYNC_CONCURRENCY,
        "control_plane_start_seconds": round(cp.timings.get("total", 0.0), 1),
        "problems": problems,
    }


def figures_for(result: dict, database: str) -> list[dict]:
    n, objects = result["namespaces"], result["objects"]
    title = f"sync {n:,} ns ({objects:,} objects) on the real control plane"
    rows = []
    for portal, kubectl, step in (
        ("portal_first_sync", "kubectl_first_apply", "first sync"),
        ("portal_unchanged_resync", "kubectl_unchanged_apply", "unchanged re-sync"),
    ):
        rows.append(
            figure(
                f"{title}: {step}",
                result[portal]["seconds"],
                "s",
                baseline=result[kubectl]["seconds"],
                baseline_label="kubectl apply --server-side, same objects, same API server",
                database=database,
                note="objects "
                + ", ".join(f"{action} {n:,}" for action, n in result[portal]["counts"].items())
                + f"; kubectl applied {result['kubectl_objects']:,} objects",
            )
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespaces", type=int, default=100 if quick() else 5000)
    args = parser.parse_args(argv)
    from controlplane.launcher import available

    if not available():
        write_skipped(NAME, "the real control plane is not built (make controlplane)")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-sync-real-") as tmp:
        for name in ("CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"):
            os.environ.pop(name, None)
        with throwaway_database("bench_sync_real") as (db_url, database):
            setup_django(db_url, var_dir=tmp)
            result = bench(args.namespaces, Path(tmp))
    write_figures(NAME, figures_for(result, database), {"size": result, "database": database})
    if result["problems"]:
        print("unexpected: " + "; ".join(result["problems"]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
