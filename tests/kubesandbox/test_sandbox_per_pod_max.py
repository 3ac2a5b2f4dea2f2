"""The portal's per-pod max, end to end: the policy, binding and team Namespace rendered by
``quotas.kube.render`` are applied to a running test server with the official client, and the
test server's admission holds pods to the max as kube-apiserver would."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kubesandbox import SandboxServer
from quotas.kube.plan import AllocationPlan, ClusterPlan, NamespacePlan, ResourcePlan, TeamPlan
from quotas.kube.render import (
    PER_POD_MAX_POLICY_NAME,
    per_pod_max_annotation,
    render_namespace_object,
    render_per_pod_max_policy,
)

GPU = ResourcePlan("nvidia.com/gpu", "gpu", gpu_model="A100 80GB")
CPU = ResourcePlan("cpu", "cpu")
CAPPED = "team-a-train"  # per-pod max: 2 GPUs, 4 cpu
UNCAPPED = "team-b-dev"  # managed by the portal, no per-pod max
FOREIGN = "other-team"  # not managed by this portal
DENIED = (
    f"ValidatingAdmissionPolicy '{PER_POD_MAX_POLICY_NAME}' with binding "
    f"'{PER_POD_MAX_POLICY_NAME}' denied request: "
)


def allocation(resource: ResourcePlan, cap: int, per_pod: int | None = None) -> AllocationPlan:
    return AllocationPlan(
        resource=resource,
        guarantee=Decimal(1),
        cap=Decimal(cap),
        per_pod_max=None if per_pod is None else Decimal(per_pod),
    )


def plan() -> ClusterPlan:
    team_a, team_b = TeamPlan("team-a", "Team A"), TeamPlan("team-b", "Team B")
    return ClusterPlan(
        name="gpu-east",
        backends=frozenset({"core"}),
        namespaces=(
            NamespacePlan(
                CAPPED, team_a, "training", (allocation(GPU, 8, 2), allocation(CPU, 64, 4))
            ),
            NamespacePlan(UNCAPPED, team_b, "dev", (allocation(GPU, 4),)),
        ),
    )


@pytest.fixture
def core(kube_sandbox: SandboxServer, kube_client: k8s.ApiClient) -> Iterator[k8s.CoreV1Api]:
    """The rendered policy, binding and namespaces applied; a namespace the portal does not
    manage carries a hand-written annotation of the same name."""
    cluster = plan()
    admission = k8s.AdmissionregistrationV1Api(kube_client)
    policy, binding = render_per_pod_max_policy(cluster)
    admission.create_validating_admission_policy(body=policy)
    admission.create_validating_admission_policy_binding(body=binding)
    core = k8s.CoreV1Api(kube_client)
    for namespace in cluster.namespaces:
        core.create_namespace(body=render_namespace_object(cluster, namespace))
    foreign = {
        "metadata": {
            "name": FOREIGN,
            "annotations": {per_pod_max_annotation("nvidia.com/gpu"): "2"},
        }
    }
    core.create_namespace(body=foreign)
    yield core


def container(name: str = "main", gpus: int | None = None, **extra: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "busybox", **extra}
    if gpus is not None:
        c["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return c


def pod(name: str, *containers: dict[str, Any], init: tuple = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def create(core: k8s.CoreV1Api, namespace: str, body: dict[str, Any]) -> None:
    core.create_namespaced_pod(namespace, body)


def denial(core: k8s.CoreV1Api, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(namespace, body)
    status = json.loads(caught.value.body)
    assert caught.value.status == status["code"]
    return status


def test_pods_within_the_max_are_admitted(core: k8s.CoreV1Api) -> None:
    create(core, CAPPED, pod("cpu-only", container(resources={"limits": {"cpu": "1"}})))
    create(core, CAPPED, pod("no-resources", container()))
    create(core, CAPPED, pod("two-gpus", container(gpus=2)))
    create(core, CAPPED, pod("one-and-one", container("a", gpus=1), container("b", gpus=1)))
    names = {p.metadata.name for p in core.list_namespaced_pod(CAPPED).items}
    assert names == {"cpu-only", "no-resources", "two-gpus", "one-and-one"}


def test_three_gpus_in_one_container_are_denied_as_upstream(core: k8s.CoreV1Api) -> None:
    status = denial(core, CAPPED, pod("three", container(gpus=3)))
    message = (
        DENIED + "the pod states 3 nvidia.com/gpu (limits, else requests), above the "
        f"per-pod max 2 of namespace {CAPPED}"
    )
    # The rendered validation's reason is Forbidden: 403 (the default, Invalid, would be 422).
    assert status["code"] == 403 and status["reason"] == "Forbidden"
    assert status["message"] == f'pods "three" is forbidden: {message}'
    assert status["details"] == {"name": "three", "kind": "pods", "causes": [{"message": message}]}
    assert core.list_namespaced_pod(CAPPED).items == []


def test_containers_are_summed(core: k8s.CoreV1Api) -> None:
    status = denial(core, CAPPED, pod("two-by-two", container("a", gpus=2), container("b", 2)))
    assert "the pod states 4 nvidia.com/gpu (limits, else requests)" in status["message"]


def test_init_containers_as_rendered(core: k8s.CoreV1Api) -> None:
    # A one-shot init container runs before the containers: the larger of the two counts.
    create(core, CAPPED, pod("init-2", container(gpus=2), init=(container("setup", gpus=2),)))
    status = denial(core, CAPPED, pod("init-3", container(), init=(container("setup", gpus=3),)))
    assert (
        DENIED + "an init container of the pod states more nvidia.com/gpu (limits, else requests)"
        in (status["message"])
    )
    # A sidecar (restartPolicy Always) runs next to the containers: it adds up.
    sidecar = container("proxy", gpus=1, restartPolicy="Always")
    create(core, CAPPED, pod("sidecar-1-1", container(gpus=1), init=(sidecar,)))
    status = denial(core, CAPPED, pod("sidecar-1-2", container(gpus=2), init=(sidecar,)))
    assert "the pod states 3 nvidia.com/gpu" in status["message"]


def test_requests_and_pod_level_resources_count_as_rendered(core: k8s.CoreV1Api) -> None:
    requests_only = container(resources={"requests": {"cpu": "5"}})
    status = denial(core, CAPPED, pod("requests-only", requests_only))
    assert "the pod states 5 cpu (limits, else requests)" in status["message"]
    pod_level = pod("pod-level", container())
    pod_level["spec"]["resources"] = {"limits": {"cpu": "5"}}
    assert "the pod states 5 cpu" in denial(core, CAPPED, pod_level)["message"]
    create(core, CAPPED, pod("four", container(resources={"requests": {"cpu": "4"}})))


def test_namespaces_without_a_max_are_not_held(core: k8s.CoreV1Api) -> None:
    create(core, UNCAPPED, pod("sixteen", container(gpus=16)))
    # The same annotation on a namespace this portal does not manage is not read.
    create(core, FOREIGN, pod("three", container(gpus=3)))
    create(core, "default", pod("three", container(gpus=3)))


def test_dry_run_and_server_side_apply_are_held_too(
    core: k8s.CoreV1Api, kube_client: k8s.ApiClient
) -> None:
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(CAPPED, pod("dry", container(gpus=3)), dry_run="All")
    assert caught.value.status == 403
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_pod(
            "applied",
            CAPPED,
            pod("applied", container(gpus=3)),
            field_manager="test",
            _content_type="application/apply-patch+yaml",
        )
    assert caught.value.status == 403 and DENIED in json.loads(caught.value.body)["message"]


def test_only_create_and_resize_are_checked(core: k8s.CoreV1Api) -> None:
    """A pod created under a higher max keeps working (labels, finalizers) after the max is
    lowered; only new pods and in-place resizes are held to it."""
    cpu_pod = pod("resizable", container(resources={"limits": {"cpu": "2"}}))
    create(core, CAPPED, pod("two-gpus", container(gpus=2)))
    create(core, CAPPED, cpu_pod)
    key = per_pod_max_annotation("nvidia.com/gpu")
    core.patch_namespace(CAPPED, {"metadata": {"annotations": {key: "1"}}})
    core.patch_namespaced_pod("two-gpus", CAPPED, {"metadata": {"labels": {"seen": "yes"}}})
    assert denial(core, CAPPED, pod("two-more", container(gpus=2)))["code"] == 403

    # In-place resize (pods/resize) of cpu is held to the cpu max of 4.
    def resize(cpu: str) -> None:
        body = {"spec": {"containers": [{"name": "main", "resources": {"limits": {"cpu": cpu}}}]}}
        core.patch_namespaced_pod_resize("resizable", CAPPED, body)

    resize("3")
    gpu_limits = {"nvidia.com/gpu": "1"}
    with pytest.raises(ApiException) as caught:
        resize("5")
    status = json.loads(caught.value.body)
    assert caught.value.status == 403
    assert (
        "the pod states 5 cpu (limits, else requests), above the per-pod max 4"
        in (status["message"])
    )
    limits = core.read_namespaced_pod("resizable", CAPPED).spec.containers[0].resources.limits
    assert limits == {"cpu": "3"}
    # Kubernetes itself refuses to resize anything but cpu and memory, before any policy.
    gpus = {"spec": {"containers": [{"name": "main", "resources": {"limits": gpu_limits}}]}}
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_pod_resize("two-gpus", CAPPED, gpus)
    status = json.loads(caught.value.body)
    assert caught.value.status == 422
    assert status["message"] == (
        'Pod "two-gpus" is invalid: spec: Forbidden: only cpu and memory resources are mutable'
    )


def test_the_policy_is_compiled_once_per_version(
    core: k8s.CoreV1Api, kube_sandbox: SandboxServer, kube_client: k8s.ApiClient
) -> None:
    policies = kube_sandbox.api.admission_policies
    for i in range(20):
        create(core, CAPPED, pod(f"p{i}", container(gpus=1)))
    assert policies.compilations == 1
    admission = k8s.AdmissionregistrationV1Api(kube_client)
    admission.patch_validating_admission_policy(
        PER_POD_MAX_POLICY_NAME, {"metadata": {"labels": {"touched": "yes"}}}
    )
    create(core, CAPPED, pod("after-change", container(gpus=1)))
    assert policies.compilations == 2
