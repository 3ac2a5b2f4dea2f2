"""The real control plane for the tests in this folder: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok's fake GPU nodes, Kueue and Volcano, built by
``make controlplane`` and started once per test session (``controlplane/launcher.py``).

Without the built binaries these tests are skipped on a developer machine (one line in the
header says how to enable them) and fail in CI. Each test starts from a cluster that has only
its own namespaces (``ControlPlane.reset``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from controlplane.launcher import ControlPlane, available

ENABLE_HINT = "real control plane not built: `make controlplane` (needs Go 1.26) enables tests/real"


HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:
    """Every test here is CI-only (make test-ci, not make test), marked before -m selects."""
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.ci_only)


def pytest_report_header(config) -> str | None:
    if not available():
        return f"tests/real: {ENABLE_HINT}" + (" -- required in CI" if os.environ.get("CI") else "")
    return None


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory) -> Iterator[ControlPlane]:
    if not available():
        if os.environ.get("CI"):
            pytest.fail(ENABLE_HINT, pytrace=False)
        pytest.skip(ENABLE_HINT)
    cp = ControlPlane(Path(tmp_path_factory.mktemp("controlplane")))
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture
def real_cluster(control_plane) -> Iterator[ControlPlane]:
    """The session's control plane, emptied of what the test wrote once it ends."""
    yield control_plane
    control_plane.reset()


@pytest.fixture
def on_real_cluster(real_cluster):
    """Points a portal Cluster row at the real control plane (kubeconfig connection):
    ``on_real_cluster(cluster)`` returns the refreshed row."""
    from quotas.models import Cluster

    def point(cluster: Cluster) -> Cluster:
        Cluster.objects.filter(pk=cluster.pk).update(
            connection=Cluster.Connection.KUBECONFIG,
            kubeconfig_path=str(real_cluster.kubeconfig),
            kubeconfig_context="controlplane",
        )
        cluster.refresh_from_db()
        return cluster

    return point


@pytest.fixture
def kueue_cluster(admin, on_real_cluster):
    """16 A100s on Kueue: team A 10/14 and team B 6/10 (guarantee/cap) sum to the capacity,
    so A can only reach its cap by borrowing B's idle guarantee, which B then reclaims (with
    guarantees below the capacity, the unguaranteed GPUs in the root Cohort would serve B
    without any reclaim)."""
    from quotas.models import Cluster, ClusterCapacity, Resource, Team, TeamNamespace
    from quotas.services import allocation_set

    gpu = Resource.objects.create(
        name="nvidia.com/gpu",
        display_name="A100 card",
        kind=Resource.Kind.GPU,
        unit="GPU",
        gpu_model="A100 80GB",
    )
    cluster = Cluster.objects.create(
        name="kueue-real",
        kueue_enabled=True,
        volcano_enabled=False,
        kueue_cpu_pool=Decimal(96),
        kueue_memory_pool_gib=Decimal(768),
        max_cap_share=Decimal(1),
    )
    ClusterCapacity.objects.create(cluster=cluster, resource=gpu, capacity=Decimal(16))
    for slug, guarantee, cap in (("team-a", 10, 14), ("team-b", 6, 10)):
        team = Team.objects.create(slug=slug, name=slug.title())
        namespace = TeamNamespace.objects.create(
            team=team, cluster=cluster, name=f"{slug}-training", workload_class="training"
        )
        allocation_set(
            team_namespace=namespace,
            resource=gpu,
            guarantee=guarantee,
            cap=cap,
            acting_user=admin,
            reason="kueue reclaim test",
        )
    return on_real_cluster(cluster)
