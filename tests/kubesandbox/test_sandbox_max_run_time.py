"""The portal's maximum run time, end to end on the test server: the policy, binding and team
Namespaces rendered by ``quotas.kube.render`` are applied with the official client, and the
test server's admission holds pods of a limited class to a deadline within it, as the real
API server does. (The test server serves no Jobs; what the policy does with Jobs and Kueue
Workloads is proven on the real control plane: tests/real/test_max_run_time.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kubesandbox import SandboxServer
from quotas.kube.plan import ClusterPlan, NamespacePlan, TeamPlan
from quotas.kube.render import (
    MAX_RUN_TIME_POLICY_NAME,
    max_run_time_annotation,
    render_max_run_time_policy,
    render_namespace_object,
)

LIMITED = "team-a-train"  # experiment: at most 600 s
FREE = "team-b-dev"  # managed, no maximum
FOREIGN = "other-team"  # not managed by this portal, with a look-alike annotation


def plan(**namespaces: tuple[tuple[str, int], ...]) -> ClusterPlan:
    team = TeamPlan("team-a", "Team A")
    return ClusterPlan(
        name="gpu-east",
        backends=frozenset({"core"}),
        namespaces=tuple(
            NamespacePlan(name, team, "training", (), max_run_times=limits)
            for name, limits in namespaces.items()
        ),
    )


CLUSTER = plan(**{LIMITED: (("experiment", 600),), FREE: ()})


@pytest.fixture
def core(kube_sandbox: SandboxServer, kube_client: k8s.ApiClient) -> Iterator[k8s.CoreV1Api]:
    admission = k8s.AdmissionregistrationV1Api(kube_client)
    policy, binding = render_max_run_time_policy(CLUSTER)
    admission.create_validating_admission_policy(body=policy)
    admission.create_validating_admission_policy_binding(body=binding)
    core = k8s.CoreV1Api(kube_client)
    for namespace in CLUSTER.namespaces:
        core.create_namespace(body=render_namespace_object(CLUSTER, namespace))
    core.create_namespace(
        body={
            "metadata": {
                "name": FOREIGN,
                "annotations": {max_run_time_annotation("experiment"): "1"},
            }
        }
    )
    for name, value in (("experiment", 1000), ("training", 10)):
        k8s.SchedulingV1Api(kube_client).create_priority_class(
            body={"metadata": {"name": name}, "value": value}
        )
    yield core


def template(priority: str | None, deadline: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox"}],
    }
    if priority:
        spec["priorityClassName"] = priority
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    return spec


def refusal(call, *args) -> str:
    with pytest.raises(ApiException) as caught:
        call(*args)
    status = json.loads(caught.value.body)
    assert caught.value.status == 403, status
    assert f"ValidatingAdmissionPolicy '{MAX_RUN_TIME_POLICY_NAME}'" in status["message"]
    return status["message"]


def test_pods_state_their_own_deadline_unless_a_job_controls_them(core) -> None:
    def pod(name: str, deadline: int | None, **metadata: Any) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, **metadata},
            "spec": template("experiment", deadline),
        }

    assert "Pod bare of priority class experiment" in refusal(
        core.create_namespaced_pod, LIMITED, pod("bare", None)
    )
    assert "it states 601" in refusal(core.create_namespaced_pod, LIMITED, pod("long", 601))
    core.create_namespaced_pod(LIMITED, pod("bounded", 600))
    # Other namespaces, other classes: no deadline needed.
    core.create_namespaced_pod(FREE, pod("free", None))
    core.create_namespaced_pod(FOREIGN, pod("foreign", None))
    training = pod("training", None)
    training["spec"]["priorityClassName"] = "training"
    core.create_namespaced_pod(LIMITED, training)
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "exact",
        "uid": "5d0c4b39-0f0a-4c35-9f33-4e1f0c8a1b2c",
        "controller": True,
    }
    core.create_namespaced_pod(LIMITED, pod("of-a-job", None, ownerReferences=[owner]))
    # Owned, but not controlled by a Job: held to its own deadline.
    replica = dict(owner, apiVersion="apps/v1", kind="ReplicaSet")
    refusal(
        core.create_namespaced_pod, LIMITED, pod("of-a-replicaset", None, ownerReferences=[replica])
    )


def test_nothing_is_rendered_without_a_maximum_and_kueue_workloads_only_with_kueue() -> None:
    assert render_max_run_time_policy(plan(**{FREE: ()})) == []
    annotations = render_namespace_object(CLUSTER, CLUSTER.namespaces[0])["metadata"]
    assert annotations["annotations"] == {"quota-portal/max-run-time.experiment": "600"}
    core_rules = render_max_run_time_policy(CLUSTER)[0]["spec"]["matchConstraints"]
    assert {r["apiGroups"][0] for r in core_rules["resourceRules"]} == {"", "batch"}
    kueue = ClusterPlan(**{**CLUSTER.__dict__, "backends": frozenset({"core", "kueue"})})
    rules = render_max_run_time_policy(kueue)[0]["spec"]["matchConstraints"]["resourceRules"]
    workloads = [r for r in rules if r["apiGroups"] == ["kueue.x-k8s.io"]]
    assert workloads == [
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "apiVersions": ["v1beta2"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["workloads"],
            "scope": "Namespaced",
        }
    ]
    with pytest.raises(ValueError, match="too long"):
        max_run_time_annotation("x" * 51)
