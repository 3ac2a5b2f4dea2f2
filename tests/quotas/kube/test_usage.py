"""Usage read from the cluster: GPU requests of running and pending pods per namespace."""

from decimal import Decimal

import pytest

from quotas.kube.client import KubeClient
from quotas.kube.live_usage import team_usage_now
from quotas.kube.pods import pod_amounts
from quotas.models import Cluster


def pod(name, phase, *containers, init=(), sidecars=()):
    def container(i, requests, limits=None):
        resources = {"requests": requests}
        if limits:
            resources["limits"] = limits
        return {"name": f"c{i}", "image": "x", "resources": resources}

    def sidecar(i, requests, limits=None):
        return {**container(i, requests, limits), "name": f"s{i}", "restartPolicy": "Always"}

    init_containers = [container(9, *c) for c in init]
    init_containers += [sidecar(i, *c) for i, c in enumerate(sidecars)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [container(i, *c) for i, c in enumerate(containers)],
            **({"initContainers": init_containers} if init_containers else {}),
        },
        "status": {"phase": phase},
    }


def test_pod_amounts_sum_containers_and_take_the_largest_init():
    p = pod(
        "p",
        "Running",
        ({"cpu": "500m"}, {"nvidia.com/gpu": "2"}),  # extended resources: the limit counts
        ({"cpu": "1", "nvidia.com/gpu": "1"},),
        init=[({"nvidia.com/gpu": "4"},)],
    )
    assert pod_amounts(p) == {"cpu": Decimal("1.5"), "nvidia.com/gpu": Decimal(4)}


def test_a_sidecar_init_container_counts_next_to_the_app_containers():
    """A sidecar (restartPolicy: Always) runs as long as the pod: its GPU is taken next to the
    app's, and a one-shot init container runs next to it. Counting it as a one-shot init
    container (the larger of the two) undercounted the pod by the sidecar's amount."""
    gpus = {"nvidia.com/gpu": "1"}
    p = pod(
        "p",
        "Running",
        ({"nvidia.com/gpu": "2", "cpu": "1"}, {"nvidia.com/gpu": "2"}),
        init=[({"nvidia.com/gpu": "2", "cpu": "3"}, {"nvidia.com/gpu": "2"})],
        sidecars=[({**gpus, "cpu": "250m"}, gpus)],
    )
    assert pod_amounts(p) == {"nvidia.com/gpu": Decimal(3), "cpu": Decimal("3.25")}


@pytest.mark.django_db
def test_usage_now_counts_running_and_pending_pods(kube_sandbox, alloc_a):
    ns = alloc_a.team_namespace
    Cluster.objects.filter(pk=ns.cluster_id).update(sandbox_url=kube_sandbox.url)
    kube = KubeClient.for_url(kube_sandbox.url)
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns.name}})
    # An API server refuses a GPU request without the same limit (GPUs are not overcommitted).
    for obj in (
        pod("train-1", "Running", ({"nvidia.com/gpu": "4"}, {"nvidia.com/gpu": "4"})),
        pod("train-2", "Running", ({"nvidia.com/gpu": "2"}, {"nvidia.com/gpu": "2"})),
        pod("waiting", "Pending", ({"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "8"})),
        pod("done", "Succeeded", ({"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "8"})),
        pod("cpu-only", "Running", ({"cpu": "2"},)),
        # 2 GPUs of the app and 1 of a sidecar that runs next to it: 3.
        pod(
            "with-sidecar",
            "Running",
            ({"nvidia.com/gpu": "2"}, {"nvidia.com/gpu": "2"}),
            sidecars=[({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"})],
        ),
    ):
        obj["metadata"]["namespace"] = ns.name
        kube.create(obj)
    kube.close()
    snapshot = team_usage_now(ns.team)
    [entry] = snapshot["namespaces"]
    assert entry["namespace"] == "team-a-training"
    assert entry["usage"]["nvidia.com/gpu"] == {"running": "9", "pending": "8", "pending_pods": 1}


@pytest.mark.django_db
def test_unreachable_cluster_is_reported_not_raised(alloc_a):
    snapshot = team_usage_now(alloc_a.team_namespace.team)
    [entry] = snapshot["namespaces"]
    assert "unreachable" in entry["error"]
    assert "usage" not in entry
