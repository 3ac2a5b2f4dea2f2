"""The sandbox through the official Python client (kubernetes 37, pydantic models)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from kubesandbox import SandboxServer
from tests.support.kube import api_client_for

APPLY = "application/apply-patch+yaml"


def make_namespace(core: k8s.CoreV1Api, name: str = "team-a") -> k8s.V1Namespace:
    return core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))


def gpu_quota(gpus: str = "4") -> k8s.V1ResourceQuota:
    return k8s.V1ResourceQuota(
        metadata=k8s.V1ObjectMeta(name="gpu", labels={"app.kubernetes.io/managed-by": "portal"}),
        spec=k8s.V1ResourceQuotaSpec(hard={"requests.nvidia.com/gpu": gpus}),
    )


def test_namespace_and_resource_quota_lifecycle(kube_client: k8s.ApiClient) -> None:
    core = k8s.CoreV1Api(kube_client)
    ns = make_namespace(core)
    assert isinstance(ns, k8s.V1Namespace) and ns.status.phase == "Active"
    assert ns.metadata.labels["kubernetes.io/metadata.name"] == "team-a"

    created = core.create_namespaced_resource_quota("team-a", gpu_quota())
    assert isinstance(created, k8s.V1ResourceQuota)
    assert created.spec.hard == {"requests.nvidia.com/gpu": "4"} and created.metadata.uid

    read = core.read_namespaced_resource_quota("gpu", "team-a")
    assert read.metadata.resource_version == created.metadata.resource_version

    read.spec.hard["requests.nvidia.com/gpu"] = "6"
    replaced = core.replace_namespaced_resource_quota("gpu", "team-a", read)
    assert int(replaced.metadata.resource_version) > int(read.metadata.resource_version)

    patched = core.patch_namespaced_resource_quota(
        "gpu", "team-a", {"spec": {"hard": {"cpu": "8"}}}
    )
    assert patched.spec.hard == {"requests.nvidia.com/gpu": "6", "cpu": "8"}

    listed = core.list_resource_quota_for_all_namespaces(
        label_selector="app.kubernetes.io/managed-by=portal"
    )
    assert isinstance(listed, k8s.V1ResourceQuotaList) and [
        q.metadata.name for q in listed.items
    ] == ["gpu"]

    deleted = core.delete_namespaced_resource_quota("gpu", "team-a")
    assert isinstance(deleted, k8s.V1ResourceQuota) and deleted.metadata.name == "gpu"
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_resource_quota("gpu", "team-a")
    assert missing.value.status == 404

    gone = core.delete_namespace("team-a")
    # Namespace and Status deletes come back as plain dicts from this client version.
    assert gone["status"] == {"phase": "Terminating"}


def test_error_status_codes(kube_client: k8s.ApiClient) -> None:
    core = k8s.CoreV1Api(kube_client)
    with pytest.raises(ApiException) as no_namespace:
        core.create_namespaced_resource_quota("team-x", gpu_quota())
    assert no_namespace.value.status == 404
    make_namespace(core)
    first = core.create_namespaced_resource_quota("team-a", gpu_quota())
    with pytest.raises(ApiException) as exists:
        core.create_namespaced_resource_quota("team-a", gpu_quota())
    assert exists.value.status == 409
    core.patch_namespaced_resource_quota("gpu", "team-a", {"spec": {"hard": {"cpu": "1"}}})
    with pytest.raises(ApiException) as stale:
        core.replace_namespaced_resource_quota("gpu", "team-a", first)
    assert stale.value.status == 409 and "the object has been modified" in stale.value.body
    with pytest.raises(ApiException) as invalid:
        core.create_namespaced_resource_quota(
            "team-a",
            k8s.V1ResourceQuota(
                metadata=k8s.V1ObjectMeta(name="bad"),
                spec=k8s.V1ResourceQuotaSpec(hard={"requests.nvidia.com/gpu": "ten"}),
            ),
        )
    assert (
        invalid.value.status == 422 and "spec.hard[requests.nvidia.com/gpu]" in invalid.value.body
    )


def test_server_side_apply_with_the_client(
    kube_client: k8s.ApiClient, kube_sandbox: SandboxServer
) -> None:
    core = k8s.CoreV1Api(kube_client)
    make_namespace(core)
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu", "namespace": "team-a"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "4"}},
    }
    applied = core.patch_namespaced_resource_quota(
        "gpu", "team-a", body, field_manager="portal", force=True, _content_type=APPLY
    )
    assert isinstance(applied, k8s.V1ResourceQuota) and applied.spec.hard == {
        "requests.nvidia.com/gpu": "4"
    }
    [entry] = applied.metadata.managed_fields
    assert (entry.manager, entry.operation) == ("portal", "Apply")
    writes = kube_sandbox.stats.writes
    again = core.patch_namespaced_resource_quota(
        "gpu", "team-a", body, field_manager="portal", force=True, _content_type=APPLY
    )
    assert again.metadata.resource_version == applied.metadata.resource_version
    assert kube_sandbox.stats.writes == writes
    body["spec"]["hard"]["requests.nvidia.com/gpu"] = "5"
    with pytest.raises(ApiException) as conflict:
        core.patch_namespaced_resource_quota(
            "gpu", "team-a", body, field_manager="other", _content_type=APPLY
        )
    assert conflict.value.status == 409


def test_custom_objects(kube_client: k8s.ApiClient) -> None:
    core = k8s.CoreV1Api(kube_client)
    custom = k8s.CustomObjectsApi(kube_client)
    make_namespace(core)
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "team-a"},
        "spec": {
            "weight": 1,
            "reclaimable": True,
            "deserved": {"nvidia.com/gpu": "6"},
            "capability": {"nvidia.com/gpu": "10"},
        },
    }
    created = custom.create_cluster_custom_object(
        "scheduling.volcano.sh", "v1beta1", "queues", queue
    )
    assert created["metadata"]["uid"] and created["metadata"]["generation"] == 1
    fetched = custom.get_cluster_custom_object(
        "scheduling.volcano.sh", "v1beta1", "queues", "team-a"
    )
    assert fetched["spec"]["capability"] == {"nvidia.com/gpu": "10"}
    patched = custom.patch_cluster_custom_object(
        "scheduling.volcano.sh",
        "v1beta1",
        "queues",
        "team-a",
        {"spec": {"capability": {"nvidia.com/gpu": "12"}}},
    )
    assert (
        patched["spec"]["capability"] == {"nvidia.com/gpu": "12"}
        and patched["metadata"]["generation"] == 2
    )

    cluster_queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "team-a"},
        "spec": {
            "cohortName": "pool",
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "a100",
                            "resources": [
                                {"name": "nvidia.com/gpu", "nominalQuota": 6, "borrowingLimit": 4}
                            ],
                        }
                    ],
                }
            ],
        },
    }
    created = custom.create_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", cluster_queue
    )
    assert created["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    applied = custom.patch_cluster_custom_object(
        "kueue.x-k8s.io",
        "v1beta2",
        "clusterqueues",
        "team-a",
        {**cluster_queue, "spec": {**cluster_queue["spec"], "cohortName": "other"}},
        field_manager="portal",
        force=True,
        _content_type=APPLY,
    )
    assert applied["spec"]["cohortName"] == "other"

    local_queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "default", "namespace": "team-a"},
        "spec": {"clusterQueue": "team-a"},
    }
    custom.create_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", "team-a", "localqueues", local_queue
    )
    listed = custom.list_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", "team-a", "localqueues"
    )
    assert listed["kind"] == "LocalQueueList" and [
        i["metadata"]["name"] for i in listed["items"]
    ] == ["default"]
    with pytest.raises(ApiException) as invalid:
        custom.create_cluster_custom_object(
            "scheduling.volcano.sh",
            "v1beta1",
            "queues",
            {**queue, "metadata": {"name": "bad"}, "spec": {"weight": "heavy"}},
        )
    assert invalid.value.status == 422
    with pytest.raises(ApiException) as missing:
        custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "nope")
    assert missing.value.status == 404


def test_priority_class(kube_client: k8s.ApiClient) -> None:
    scheduling = k8s.SchedulingV1Api(kube_client)
    created = scheduling.create_priority_class(
        k8s.V1PriorityClass(
            metadata=k8s.V1ObjectMeta(name="inference-high"),
            value=100000,
            description="production inference",
        )
    )
    assert isinstance(created, k8s.V1PriorityClass) and created.value == 100000
    assert [p.metadata.name for p in scheduling.list_priority_class().items] == ["inference-high"]


def test_pods_for_usage(kube_client: k8s.ApiClient) -> None:
    core = k8s.CoreV1Api(kube_client)
    make_namespace(core)
    for name, phase in (("a", "Running"), ("b", "Pending")):
        core.create_namespaced_pod(
            "team-a",
            k8s.V1Pod(
                metadata=k8s.V1ObjectMeta(name=name),
                spec=k8s.V1PodSpec(
                    containers=[
                        k8s.V1Container(
                            name="main",
                            image="trainer",
                            resources=k8s.V1ResourceRequirements(limits={"nvidia.com/gpu": "2"}),
                        )
                    ]
                ),
                status=k8s.V1PodStatus(phase=phase),
            ),
        )
    running = core.list_pod_for_all_namespaces(field_selector="status.phase=Running")
    assert [p.metadata.name for p in running.items] == ["a"]
    # Requests default to the limits, as on a real API server.
    assert running.items[0].spec.containers[0].resources.requests == {"nvidia.com/gpu": "2"}


def test_bearer_token_with_the_client() -> None:
    server = SandboxServer(token="t0ken").start()
    try:
        with api_client_for(server) as api_client:
            assert k8s.CoreV1Api(api_client).read_namespace("default").metadata.name == "default"
        configuration = k8s.Configuration()
        configuration.host = server.url
        with k8s.ApiClient(configuration) as anonymous, pytest.raises(ApiException) as denied:
            k8s.CoreV1Api(anonymous).read_namespace("default")
        assert denied.value.status == 401
    finally:
        server.stop()
