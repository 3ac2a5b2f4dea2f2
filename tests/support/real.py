"""Helpers of the tests on the real control plane (tests/real)."""

from __future__ import annotations


def sync_now(cluster, trigger: str = "reconcile"):
    """One sync of ``cluster`` in this process (the portal's real sync code and client); the
    run, refreshed. A reconcile compares every object; "change" only what changed."""
    from quotas.kube.sync import cluster_sync

    run = cluster_sync(cluster_id=cluster.pk, trigger=trigger, worker="tests-real")
    run.refresh_from_db()
    return run
