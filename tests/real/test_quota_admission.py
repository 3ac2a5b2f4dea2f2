"""What the portal's core objects make the real API server do with pods: the ResourceQuota
refuses pods above the cap and of other priority classes and counts running pods; the per-pod
max policy refuses pods above the max (limits, requests and pod-level resources alike) and
admits CPU-only pods; a cpu/memory quota comes with default requests (LimitRange), so a
sidecar that states none is admitted; a HAMi namespace refuses GPU-only containers.

Pods run no containers here (kwok): only admission and the quota controller are exercised."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from quotas.models import Allocation, Cluster, Resource, TeamNamespace
from quotas.services import allocation_set, cluster_plan_touch
from tests.support.real import sync_now
from tests.support.waiting import poll

pytestmark = pytest.mark.django_db

DEADLINE = 60


def synced(cluster: Cluster) -> None:
    run = sync_now(cluster)
    assert run.status == run.Status.SUCCEEDED, (run.error, run.backend_problems, run.counts)


def quota_enforced(cp, namespace: str, name: str = "gpu-quota") -> dict:
    """Waits until the quota controller has copied spec.hard to status.hard: admission only
    enforces a quota once its status is filled."""

    def ready():
        quota = cp.get_json("resourcequota", name, namespace)
        if quota and quota.get("status", {}).get("hard") == quota["spec"]["hard"]:
            return quota
        return None

    return poll(f"quota {namespace}/{name} status.hard", ready, DEADLINE, 0.3)


def used(cp, namespace: str, key: str, name: str = "gpu-quota") -> str:
    quota = cp.get_json("resourcequota", name, namespace)
    return quota.get("status", {}).get("used", {}).get(key, "")


def container(name: str = "main", *, limits: dict | None = None, requests: dict | None = None):
    c: dict = {"name": name, "image": "busybox"}
    resources = {}
    if limits:
        resources["limits"] = limits
    if requests:
        resources["requests"] = requests
    if resources:
        c["resources"] = resources
    return c


def pod(name: str, namespace: str, *containers, priority: str | None, resources=None) -> dict:
    spec: dict = {"schedulerName": "default-scheduler", "containers": list(containers)}
    if priority:
        spec["priorityClassName"] = priority
    if priority == "experiment" and namespace == "team-c-dev":
        spec["activeDeadlineSeconds"] = 3600  # the demo's maximum run time there is a day
    if resources:
        spec["resources"] = resources
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def create(cp, obj: dict, *, dry_run: bool = False):
    """``kubectl create`` of ``obj``; the CompletedProcess (returncode 0: admitted)."""
    args = ["create", "-o", "json", "-f", "-"]
    if dry_run:
        args.append("--dry-run=server")
    return cp.kubectl(*args, input=json.dumps(obj), check=False)


def admitted(cp, obj: dict) -> dict:
    proc = create(cp, obj)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def refused(cp, obj: dict) -> str:
    proc = create(cp, obj)
    assert proc.returncode != 0, f"{obj['metadata']['name']} was admitted"
    return proc.stderr


def policy_enforced(cp, violating: dict) -> None:
    """Waits until the API server enforces the admission policy (it loads policies
    asynchronously): a server-side dry run of a violating pod is refused."""
    poll(
        "the per-pod max policy to be enforced",
        lambda: create(cp, violating, dry_run=True).returncode != 0,
    )


def delete_pod(cp, namespace: str, name: str) -> None:
    cp.kubectl("delete", "pod", name, "-n", namespace, "--grace-period=0", "--force")


@pytest.fixture
def demo(real_cluster, on_real_cluster):
    call_command("seed_demo")
    cluster = on_real_cluster(Cluster.objects.get(name="demo"))
    return cluster


def resource(name: str, kind: str, suffix: str = "") -> Resource:
    obj, _ = Resource.objects.get_or_create(
        name=name, defaults={"display_name": name, "kind": kind, "quantity_suffix": suffix}
    )
    return obj


def allocate(cluster, namespace: str, res: Resource, guarantee, cap, per_pod_max=None, classes=()):
    allocation_set(
        team_namespace=TeamNamespace.objects.get(cluster=cluster, name=namespace),
        resource=res,
        guarantee=guarantee,
        cap=cap,
        per_pod_max=per_pod_max,
        priority_classes=classes,
        acting_user=None,
        reason="test",
    )


def gpus(n) -> dict:
    return {"nvidia.com/gpu": str(n)}


# --------------------------------------------------------------------------------------------
# ResourceQuota


def test_quota_refuses_above_the_cap_and_status_used_follows_running_pods(real_cluster, demo):
    cp, ns = real_cluster, "team-a-training"
    synced(demo)
    quota_enforced(cp, ns)

    admitted(cp, pod("six", ns, container(limits=gpus(6)), priority="training"))
    poll("used to rise to 6", lambda: used(cp, ns, "requests.nvidia.com/gpu") == "6")
    poll(
        "the pod to run",
        lambda: cp.get_json("pod", "six", ns)["status"].get("phase") == "Running",
    )

    # 6 + 6 > cap 10 (and 6 <= per-pod max 8): the quota, not the policy, refuses.
    message = refused(cp, pod("six-more", ns, container(limits=gpus(6)), priority="experiment"))
    assert "exceeded quota: gpu-quota" in message, message
    assert "requested: requests.nvidia.com/gpu=6" in message, message
    assert "used: requests.nvidia.com/gpu=6" in message, message
    assert "limited: requests.nvidia.com/gpu=10" in message, message
    admitted(cp, pod("four", ns, container(limits=gpus(4)), priority="experiment"))
    poll("used to reach 10", lambda: used(cp, ns, "requests.nvidia.com/gpu") == "10")

    delete_pod(cp, ns, "six")
    poll("used to fall to 4", lambda: used(cp, ns, "requests.nvidia.com/gpu") == "4")
    admitted(cp, pod("six-more", ns, container(limits=gpus(6)), priority="experiment"))


def test_a_pod_of_a_class_outside_the_allowed_set_is_refused(real_cluster, demo):
    cp, ns = real_cluster, "team-b-inference"
    synced(demo)
    quota_enforced(cp, ns)
    quota_enforced(cp, ns, "gpu-quota-other-classes")

    for name, priority in [("training", "training"), ("no-class", None)]:
        message = refused(cp, pod(name, ns, container(limits=gpus(1)), priority=priority))
        assert "exceeded quota: gpu-quota-other-classes" in message, message
    admitted(cp, pod("serving", ns, container(limits=gpus(1)), priority="production-inference"))
    # A class outside the set is still free to run pods that request no GPU.
    admitted(cp, pod("cpu-only", ns, container(requests={"cpu": "1"}), priority="training"))


# --------------------------------------------------------------------------------------------
# Per-pod max


def test_per_pod_max_refuses_above_the_max_and_admits_cpu_only_pods(real_cluster, demo):
    cp, ns = real_cluster, "team-b-inference"
    synced(demo)
    quota_enforced(cp, ns)
    three = pod("three", ns, container(limits=gpus(3)), priority="production-inference")
    policy_enforced(cp, three)

    message = refused(cp, three)
    assert "above the per-pod max 2 of namespace team-b-inference" in message, message
    # Two containers of 1 + 2: the sum counts.
    split = pod(
        "split",
        ns,
        container("a", limits=gpus(1)),
        container("b", limits=gpus(2)),
        priority="production-inference",
    )
    assert "per-pod max 2" in refused(cp, split)
    admitted(cp, pod("two", ns, container(limits=gpus(2)), priority="production-inference"))
    admitted(cp, pod("cpu-only", ns, container(), priority="production-inference"))


def test_per_pod_max_counts_requests_and_pod_level_resources(real_cluster, demo):
    """Defect 6: a pod stating only requests, or pod-level resources, is held to the max."""
    cp, ns = real_cluster, "team-a-training"
    allocate(demo, ns, resource("cpu", Resource.Kind.CPU), 8, 32, 4, ("training", "experiment"))
    allocate(demo, ns, resource("memory", Resource.Kind.MEMORY, "Gi"), 16, 64, 8)
    synced(demo)
    quota_enforced(cp, ns)

    def cpu_pod(name, *containers, resources=None):
        return pod(name, ns, *containers, priority="training", resources=resources)

    requests_only = cpu_pod("requests-only", container(requests={"cpu": "6", "memory": "1Gi"}))
    policy_enforced(cp, cpu_pod("limits", container(limits={"cpu": "6", "memory": "1Gi"})))

    message = refused(cp, requests_only)
    assert "above the per-pod max 4 of namespace team-a-training" in message, message
    assert "cpu" in message, message
    memory = refused(cp, cpu_pod("memory", container(requests={"cpu": "1", "memory": "9Gi"})))
    assert "above the per-pod max 8Gi" in memory, memory

    # Pod-level resources (PodLevelResources, beta and on since 1.34): containers state none.
    for field in ("requests", "limits"):
        message = refused(
            cp, cpu_pod(f"pod-level-{field}", container(), resources={field: {"cpu": "6"}})
        )
        assert "above the per-pod max 4" in message, (field, message)
    # A pod-level limit caps the pod: containers limited to 3 cpu each share at most 4 (their
    # requests must fit the pod's, which defaults to its limit).
    admitted(
        cp,
        cpu_pod(
            "pod-level-cap",
            container("a", limits={"cpu": "3"}, requests={"cpu": "1"}),
            container("b", limits={"cpu": "3"}, requests={"cpu": "1"}),
            resources={"limits": {"cpu": "4", "memory": "2Gi"}},
        ),
    )
    admitted(cp, cpu_pod("fits", container(requests={"cpu": "4", "memory": "8Gi"})))


# --------------------------------------------------------------------------------------------
# cpu/memory quota: default requests


def test_a_sidecar_without_requests_is_admitted_under_a_cpu_memory_quota(real_cluster, demo):
    """Defect 4: the API server refuses a container without cpu/memory requests when the
    namespace's quota caps them; the portal's LimitRange gives it default requests."""
    cp, ns = real_cluster, "team-c-dev"
    allocate(demo, ns, resource("cpu", Resource.Kind.CPU), 2, 8)
    allocate(demo, ns, resource("memory", Resource.Kind.MEMORY, "Gi"), 4, 16)
    synced(demo)
    quota_enforced(cp, ns)
    # What the API server stores (defaulted fields included) reads back as what was applied.
    again = sync_now(demo)
    assert {k: v for k, v in again.counts.items() if k != "unchanged" and v} == {}, again.counts

    created = admitted(
        cp,
        pod(
            "with-sidecar",
            ns,
            container(requests={"cpu": "1", "memory": "1Gi"}),
            container("mesh-proxy"),
            priority="experiment",
        ),
    )
    sidecar = created["spec"]["containers"][1]
    assert sidecar["resources"]["requests"] == {"cpu": "100m", "memory": "128Mi"}
    assert "limits" not in sidecar["resources"]  # requests only: no throttling imposed
    poll("used to count the default", lambda: used(cp, ns, "requests.cpu") == "1100m")

    # The allocations go: the LimitRange goes with them (a plain GPU quota needs none).
    Allocation.objects.filter(
        team_namespace__cluster=demo, resource__name__in=["cpu", "memory"]
    ).delete()
    cluster_plan_touch(cluster_id=demo.pk)
    synced(demo)
    assert cp.get_json("limitrange", "default-requests", ns) is None
    assert "requests.cpu" not in cp.get_json("resourcequota", "gpu-quota", ns)["spec"]["hard"]


# --------------------------------------------------------------------------------------------
# HAMi


def test_hami_namespace_refuses_a_container_stating_gpu_without_gpumem(real_cluster, demo):
    """Defect 5: HAMi gives a container that states nvidia.com/gpu but no nvidia.com/gpumem a
    whole device's memory, which no quota on nvidia.com/gpumem counts: refused."""
    cp, ns = real_cluster, "team-a-training"
    gpumem = resource("nvidia.com/gpumem", Resource.Kind.VGPU_MEMORY)
    allocate(demo, ns, gpumem, 20480, 81920, 40960, ("training", "experiment"))
    synced(demo)
    quota_enforced(cp, ns)
    again = sync_now(demo)
    assert {k: v for k, v in again.counts.items() if k != "unchanged" and v} == {}, again.counts

    gpu_only = pod("gpu-only", ns, container(limits=gpus(1)), priority="training")
    policy_enforced(cp, gpu_only)
    message = refused(cp, gpu_only)
    assert "container main states nvidia.com/gpu without nvidia.com/gpumem" in message, message

    sliced = {**gpus(1), "nvidia.com/gpumem": "10240"}
    admitted(cp, pod("sliced", ns, container(limits=sliced), priority="training"))
    # The per-pod max on gpumem now sees every HAMi container of the namespace.
    too_big = {**gpus(1), "nvidia.com/gpumem": "50000"}
    message = refused(cp, pod("too-big", ns, container(limits=too_big), priority="training"))
    assert "above the per-pod max 40960" in message, message
    # Namespaces without a gpumem allocation keep whole-GPU pods.
    other = "team-b-inference"
    admitted(cp, pod("whole", other, container(limits=gpus(1)), priority="production-inference"))
