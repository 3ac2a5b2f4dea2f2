"""The test server refuses what a real cluster refuses: Kubernetes' own validation of the kinds
the portal writes, namespace termination, the CRDs' CEL rules, Volcano's queue webhook, and
clusters without a scheduler's CRDs — on create, update, patch, server-side apply and dry-run."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesandbox import SandboxServer
from kubesandbox.__main__ import main
from kubesandbox.celrules import (
    CelCompileError,
    CrdRule,
    UnevaluatedRule,
    check_crd_rules,
    compile_expression,
    crd_rule_inventory,
    crd_rules,
    evaluate,
    to_cel,
)
from kubesandbox.schemas import schema_dir
from tests.support.kube import APPLY, RQ_PATH, Http, namespace

PC_PATH = "/apis/scheduling.k8s.io/v1/priorityclasses"
LR_PATH = "/api/v1/namespaces/team-a/limitranges"
CM_PATH = "/api/v1/namespaces/team-a/configmaps"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
CQ_PATH = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
LQ_PATH = "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues"
VAP_PATH = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
VAPB_PATH = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
ROOT = Path(__file__).resolve().parents[2]
DENIED = 'admission webhook "validatequeue.volcano.sh" denied the request: '


@pytest.fixture
def http(kube_sandbox: SandboxServer) -> Http:
    client = Http(kube_sandbox)
    assert client("POST", "/api/v1/namespaces", namespace("team-a"))[0] == 201
    return client


def rq(hard: dict[str, Any], name: str = "gpu", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name},
        "spec": {"hard": hard, **spec},
    }


def causes(answer: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["field"], c["message"]) for c in answer["details"]["causes"]]


def assert_invalid(status: int, answer: Any, field: str, text: str) -> None:
    assert status == 422, answer
    assert answer["kind"] == "Status" and answer["reason"] == "Invalid" and answer["code"] == 422
    matching = [c for c in answer["details"]["causes"] if c["field"] == field]
    assert matching, causes(answer)
    assert any(text in c["message"] for c in matching), causes(answer)
    assert all(c["reason"].startswith("FieldValue") for c in answer["details"]["causes"])


# Every way a client writes an object: each takes (http, collection path, object) and returns
# (status, answer). The update ones first create a valid base object given by the test.
Write = Callable[[Http, str, dict[str, Any]], tuple[int, Any]]


def _create(http: Http, path: str, obj: dict[str, Any]) -> tuple[int, Any]:
    return http("POST", path, obj)


def _create_dry_run(http: Http, path: str, obj: dict[str, Any]) -> tuple[int, Any]:
    return http("POST", path + "?dryRun=All", obj)


def _apply_create(http: Http, path: str, obj: dict[str, Any]) -> tuple[int, Any]:
    url = f"{path}/{obj['metadata']['name']}?fieldManager=portal"
    return http("PATCH", url, json.dumps(obj), APPLY)


CREATES = [
    pytest.param(_create, id="create"),
    pytest.param(_create_dry_run, id="create-dry-run"),
    pytest.param(_apply_create, id="apply-create"),
]


def _put(http: Http, path: str, obj: dict[str, Any]) -> tuple[int, Any]:
    return http("PUT", f"{path}/{obj['metadata']['name']}", obj)


def _merge_patch(http: Http, path: str, obj: dict[str, Any]) -> tuple[int, Any]:
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    ctype = "application/merge-patch+json"
    return http("PATCH", f"{path}/{obj['metadata']['name']}", body, ctype)


def _json_patch_dry_run(http: Http, path: str, obj: dict[str, Any]) -> tuple[int, Any]:
    ops = [
        {"op": "replace", "path": f"/{k}", "value": v}
        for k, v in obj.items()
        if k not in ("apiVersion", "kind", "metadata")
    ]
    url = f"{path}/{obj['metadata']['name']}?dryRun=All"
    return http("PATCH", url, ops, "application/json-patch+json")


def _apply(http: Http, path: str, obj: dict[str, Any]) -> tuple[int, Any]:
    url = f"{path}/{obj['metadata']['name']}?fieldManager=portal&force=true"
    return http("PATCH", url, json.dumps(obj), APPLY)


UPDATES = [
    pytest.param(_put, id="put"),
    pytest.param(_merge_patch, id="merge-patch"),
    pytest.param(_json_patch_dry_run, id="json-patch-dry-run"),
    pytest.param(_apply, id="apply"),
]


# -- ResourceQuota ------------------------------------------------------------------------------


@pytest.mark.parametrize("write", CREATES)
@pytest.mark.parametrize("key", ["nvidia.com/gpu", "limits.nvidia.com/gpu"])
def test_quota_of_half_a_gpu_is_refused(http: Http, write: Write, key: str) -> None:
    status, answer = write(http, RQ_PATH, rq({key: "500m"}))
    assert_invalid(status, answer, f"spec.hard[{key}]", 'Invalid value: "500m": must be an integer')
    assert answer["message"].startswith('ResourceQuota "gpu" is invalid: spec.hard[')


@pytest.mark.parametrize("write", UPDATES)
def test_quota_update_to_half_a_gpu_is_refused(http: Http, write: Write) -> None:
    assert http("POST", RQ_PATH, rq({"limits.nvidia.com/gpu": "2"}))[0] == 201
    status, answer = write(http, RQ_PATH, rq({"limits.nvidia.com/gpu": "1500m"}))
    assert_invalid(status, answer, "spec.hard[limits.nvidia.com/gpu]", "must be an integer")


def test_requests_extended_quota_is_not_held_to_whole_numbers_as_upstream(http: Http) -> None:
    # kube-apiserver's integer check skips "requests."-prefixed names (IsExtendedResourceName
    # is false for them): whole GPUs there are the portal's own rule, not the cluster's.
    status, created = http("POST", RQ_PATH, rq({"requests.nvidia.com/gpu": "500m"}))
    assert status == 201, created


@pytest.mark.parametrize("write", [*CREATES])
def test_negative_quota_is_refused(http: Http, write: Write) -> None:
    status, answer = write(http, RQ_PATH, rq({"requests.nvidia.com/gpu": "-1"}))
    assert_invalid(
        status,
        answer,
        "spec.hard[requests.nvidia.com/gpu]",
        'Invalid value: "-1": must be greater than or equal to 0',
    )


@pytest.mark.parametrize("write", UPDATES)
def test_negative_quota_update_is_refused(http: Http, write: Write) -> None:
    assert http("POST", RQ_PATH, rq({"requests.cpu": "4"}))[0] == 201
    status, answer = write(http, RQ_PATH, rq({"requests.cpu": "-500m"}))
    assert_invalid(status, answer, "spec.hard[requests.cpu]", "must be greater than or equal to 0")


@pytest.mark.parametrize("write", CREATES)
def test_quota_key_that_is_no_resource_is_refused(http: Http, write: Write) -> None:
    status, answer = write(http, RQ_PATH, rq({"foo": "1"}))
    assert_invalid(
        status, answer, "spec.hard[foo]", "must be a standard resource type or fully qualified"
    )
    assert_invalid(status, answer, "spec.hard[foo]", "must be a standard resource for quota")


def test_standard_and_extended_quota_keys_are_accepted(http: Http) -> None:
    hard = {
        "requests.nvidia.com/gpu": "4",
        "limits.nvidia.com/gpumem": "40000",
        "requests.cpu": "1500m",
        "memory": "1Gi",
        "pods": "10",
        "count/jobs.batch": "3",
        "requests.hugepages-2Mi": "1Gi",
    }
    status, created = http("POST", RQ_PATH, rq(hard))
    assert status == 201, created


def test_fractional_object_count_is_refused(http: Http) -> None:
    status, answer = http("POST", RQ_PATH, rq({"pods": "1500m"}))
    assert_invalid(status, answer, "spec.hard[pods]", "must be an integer")


def test_priority_class_scope_selector_rules(http: Http) -> None:
    def selector(**requirement: Any) -> dict[str, Any]:
        return {"matchExpressions": [{"scopeName": "PriorityClass", **requirement}]}

    gpu = {"requests.nvidia.com/gpu": "0"}
    ok = rq(gpu, name="ok", scopeSelector=selector(operator="NotIn", values=["team-a"]))
    assert http("POST", RQ_PATH, ok)[0] == 201
    exists = rq(gpu, name="exists", scopeSelector=selector(operator="Exists"))
    assert http("POST", RQ_PATH, exists)[0] == 201
    status, answer = http("POST", RQ_PATH, rq(gpu, scopeSelector=selector(operator="In")))
    assert_invalid(
        status,
        answer,
        "spec.scopeSelector.matchExpressions.values",
        "must be at least one value when `operator` is 'In' or 'NotIn'",
    )
    valued = selector(operator="DoesNotExist", values=["x"])
    status, answer = http("POST", RQ_PATH, rq(gpu, scopeSelector=valued))
    assert_invalid(status, answer, "spec.scopeSelector.matchExpressions.values", "must be no value")
    # The schema has no enum for the operator: the API server's validation refuses it.
    status, answer = http("POST", RQ_PATH, rq(gpu, scopeSelector=selector(operator="Gt")))
    assert_invalid(
        status, answer, "spec.scopeSelector.matchExpressions.operator", "not a valid selector"
    )
    best_effort = {"matchExpressions": [{"scopeName": "BestEffort", "operator": "In"}]}
    status, answer = http("POST", RQ_PATH, rq({"pods": "1"}, scopeSelector=best_effort))
    assert_invalid(
        status, answer, "spec.scopeSelector.matchExpressions.operator", "must be 'Exists'"
    )


def test_scope_must_fit_the_resources_and_is_immutable(http: Http) -> None:
    status, answer = http("POST", RQ_PATH, rq({"requests.cpu": "1"}, scopes=["BestEffort"]))
    assert_invalid(status, answer, "spec.scopes", "unsupported scope applied to resource")
    status, answer = http("POST", RQ_PATH, rq({"pods": "1"}, scopes=["Nowhere"]))
    assert_invalid(status, answer, "spec.scopes", "unsupported scope")
    both = ["Terminating", "NotTerminating"]
    status, answer = http("POST", RQ_PATH, rq({"pods": "1"}, scopes=both))
    assert_invalid(status, answer, "spec.scopes", "conflicting scopes")
    assert http("POST", RQ_PATH, rq({"pods": "1"}, scopes=["BestEffort"]))[0] == 201
    status, answer = _put(http, RQ_PATH, rq({"pods": "1"}, scopes=["NotBestEffort"]))
    assert_invalid(status, answer, "spec.scopes", "field is immutable")


# -- LimitRange -----------------------------------------------------------------------------


def limit_range(*limits: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "limits"},
        "spec": {"limits": list(limits)},
    }


@pytest.mark.parametrize("write", CREATES)
def test_limit_range_min_above_max_is_refused(http: Http, write: Write) -> None:
    item = {"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}}
    status, answer = write(http, LR_PATH, limit_range(item))
    assert_invalid(
        status, answer, "spec.limits[0].min[cpu]", "min value 2 is greater than max value 1"
    )


def test_limit_range_rules(http: Http) -> None:
    too_big = {"type": "Container", "default": {"memory": "2Gi"}, "max": {"memory": "1Gi"}}
    status, answer = http("POST", LR_PATH, limit_range(too_big))
    assert_invalid(status, answer, "spec.limits[0].default[memory]", "is greater than max value")
    gpu = {"type": "Container", "default": {"nvidia.com/gpu": "2"}}
    gpu["defaultRequest"] = {"nvidia.com/gpu": "1"}
    status, answer = http("POST", LR_PATH, limit_range(gpu))
    assert_invalid(
        status,
        answer,
        "spec.limits[0].defaultRequest[nvidia.com/gpu]",
        "default value 2 must equal to defaultRequest value 1 in nvidia.com/gpu",
    )
    pod_default = {"type": "Pod", "default": {"cpu": "1"}}
    status, answer = http("POST", LR_PATH, limit_range(pod_default))
    assert_invalid(status, answer, "spec.limits[0].default", "may not be specified")
    wrong_name = {"type": "Container", "max": {"gpu": "1"}}
    status, answer = http("POST", LR_PATH, limit_range(wrong_name))
    assert_invalid(status, answer, "spec.limits[0].max[gpu]", "must be a standard resource")
    twice = {"type": "Pod", "max": {"cpu": "4"}}
    status, answer = http("POST", LR_PATH, limit_range(twice, twice))
    assert_invalid(status, answer, "spec.limits[1].type", "Duplicate value")


def test_container_max_becomes_the_default_limit(http: Http) -> None:
    # The API server's defaulting: a Container max without a default is the default limit (and
    # request), so every container without a GPU limit gets the max.
    item = {"type": "Container", "max": {"nvidia.com/gpu": "2"}}
    status, created = http("POST", LR_PATH, limit_range(item))
    assert status == 201, created
    stored = created["spec"]["limits"][0]
    assert stored["default"] == {"nvidia.com/gpu": "2"}
    assert stored["defaultRequest"] == {"nvidia.com/gpu": "2"}


# -- PriorityClass --------------------------------------------------------------------------


def priority_class(value: int, name: str = "team-a-high", **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **fields,
    }


@pytest.mark.parametrize("write", UPDATES)
def test_priority_class_value_is_immutable(http: Http, write: Write) -> None:
    assert http("POST", PC_PATH, priority_class(1000))[0] == 201
    status, answer = write(http, PC_PATH, priority_class(2000))
    assert_invalid(status, answer, "value", "Forbidden: may not be changed in an update.")
    assert answer["details"]["causes"][0]["reason"] == "FieldValueForbidden"
    assert http("GET", PC_PATH + "/team-a-high")[1]["value"] == 1000


@pytest.mark.parametrize("write", UPDATES)
def test_priority_class_preemption_policy_is_immutable(http: Http, write: Write) -> None:
    assert http("POST", PC_PATH, priority_class(1000))[0] == 201
    status, answer = write(http, PC_PATH, priority_class(1000, preemptionPolicy="Never"))
    assert_invalid(status, answer, "preemptionPolicy", 'Invalid value: "Never": field is immutable')


def test_priority_class_defaults_and_unchanged_rewrites(http: Http) -> None:
    status, created = http("POST", PC_PATH, priority_class(1000, description="a"))
    assert status == 201 and created["preemptionPolicy"] == "PreemptLowerPriority"
    # Writing the default explicitly, or changing the description, is no change of the policy.
    again = priority_class(1000, description="b", preemptionPolicy="PreemptLowerPriority")
    assert _apply(http, PC_PATH, again)[0] == 200
    assert _put(http, PC_PATH, priority_class(1000, description="c"))[0] == 200


@pytest.mark.parametrize("write", CREATES)
def test_priority_class_value_range(http: Http, write: Write) -> None:
    status, answer = write(http, PC_PATH, priority_class(1_000_000_001))
    assert_invalid(
        status, answer, "value", "maximum allowed value of a user defined priority is 1000000000"
    )
    assert write(http, PC_PATH, priority_class(1_000_000_000, name="top"))[0] in (200, 201)


def test_system_priority_class_names_are_reserved(http: Http) -> None:
    status, answer = http("POST", PC_PATH, priority_class(1_000_000_001, name="system-team-a"))
    assert_invalid(status, answer, "metadata.name", "reserved for system use only")


# -- ConfigMap ------------------------------------------------------------------------------


def config_map(data: dict[str, str], **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "yunikorn-configs"},
        "data": data,
        **fields,
    }


@pytest.mark.parametrize("write", CREATES)
def test_config_map_keys_must_be_valid(http: Http, write: Write) -> None:
    status, answer = write(http, CM_PATH, config_map({"queues yaml": "x"}))
    assert_invalid(status, answer, "data[queues yaml]", "a valid config key must consist of")
    status, answer = write(http, CM_PATH, config_map({"..hidden": "x"}))
    assert_invalid(status, answer, "data[..hidden]", "must not start with '..'")


def test_immutable_config_map_cannot_change(http: Http) -> None:
    assert http("POST", CM_PATH, config_map({"queues.yaml": "a"}, immutable=True))[0] == 201
    status, answer = _put(http, CM_PATH, config_map({"queues.yaml": "b"}, immutable=True))
    assert_invalid(status, answer, "data", "field is immutable when `immutable` is set")


# -- Namespace termination -------------------------------------------------------------------


@pytest.fixture
def slow_namespaces() -> Iterator[SandboxServer]:
    server = SandboxServer(namespace_finalize_seconds=0.5).start()
    try:
        yield server
    finally:
        server.stop()


def test_namespace_deletion_goes_through_terminating(slow_namespaces: SandboxServer) -> None:
    http = Http(slow_namespaces)
    assert http("POST", "/api/v1/namespaces", namespace("team-a"))[0] == 201
    assert http("POST", RQ_PATH, rq({"requests.nvidia.com/gpu": "4"}))[0] == 201
    status, gone = http("DELETE", "/api/v1/namespaces/team-a")
    assert status == 200 and gone["status"]["phase"] == "Terminating"
    status, live = http("GET", "/api/v1/namespaces/team-a")
    assert status == 200 and live["status"]["phase"] == "Terminating"
    assert live["metadata"]["deletionTimestamp"]
    # New objects are refused (403, as the NamespaceLifecycle admission plugin answers) ...
    status, answer = http("POST", RQ_PATH, rq({"pods": "1"}, name="other"))
    assert status == 403 and answer["reason"] == "Forbidden"
    assert answer["message"] == (
        'resourcequotas "other" is forbidden: unable to create new content in namespace team-a '
        "because it is being terminated"
    )
    assert answer["details"]["causes"] == [
        {
            "reason": "NamespaceTerminating",
            "message": "namespace team-a is being terminated",
            "field": "metadata.namespace",
        }
    ]
    status, _ = _apply_create(http, RQ_PATH, rq({"pods": "1"}, name="other"))
    assert status == 403
    # ... a new namespace of the same name is a conflict, existing objects may still change.
    assert http("POST", "/api/v1/namespaces", namespace("team-a"))[0] == 409
    assert _put(http, RQ_PATH, rq({"requests.nvidia.com/gpu": "5"}))[0] == 200
    assert http("DELETE", "/api/v1/namespaces/team-a")[0] == 200
    deadline = time.monotonic() + 5
    while http("GET", "/api/v1/namespaces/team-a")[0] != 404:
        assert time.monotonic() < deadline, "the namespace never went away"
        time.sleep(0.05)
    assert http("GET", RQ_PATH + "/gpu")[0] == 404
    assert http("POST", "/api/v1/namespaces", namespace("team-a"))[0] == 201


def test_terminating_namespace_is_finished_on_stop(tmp_path) -> None:
    state = tmp_path / "state.json"
    server = SandboxServer(state_file=state, namespace_finalize_seconds=60).start()
    http = Http(server)
    http("POST", "/api/v1/namespaces", namespace("team-a"))
    http("POST", RQ_PATH, rq({"pods": "1"}))
    assert http("DELETE", "/api/v1/namespaces/team-a")[1]["status"]["phase"] == "Terminating"
    server.stop()
    again = SandboxServer(state_file=state).start()
    try:
        assert again.get_object("v1", "Namespace", "team-a") is None
        assert again.get_object("v1", "ResourceQuota", "gpu", "team-a") is None
    finally:
        again.stop()


def test_namespace_dry_run_delete_changes_nothing(http: Http) -> None:
    status, gone = http("DELETE", "/api/v1/namespaces/team-a?dryRun=All")
    assert status == 200 and gone["status"]["phase"] == "Terminating"
    assert http("GET", "/api/v1/namespaces/team-a")[1]["status"]["phase"] == "Active"


# -- ValidatingAdmissionPolicy ------------------------------------------------------------------

POD_GPU_SUM = (
    "object.spec.containers.map(c, has(c.resources) && has(c.resources.limits) && "
    "'nvidia.com/gpu' in c.resources.limits ? int(c.resources.limits['nvidia.com/gpu']) : 0)"
    ".sum() <= 4"
)


def policy(expression: str = POD_GPU_SUM, **spec: Any) -> dict[str, Any]:
    rules = [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["pods"],
        }
    ]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "gpu-per-pod"},
        "spec": {
            "matchConstraints": {"resourceRules": rules},
            "validations": [{"expression": expression, "message": "at most 4 GPUs per pod"}],
            **spec,
        },
    }


def binding(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "gpu-per-pod-team-a"},
        "spec": spec,
    }


def test_admission_policies_are_served_and_defaulted(http: Http) -> None:
    _, listed = http("GET", "/apis/admissionregistration.k8s.io/v1")
    names = {r["name"] for r in listed["resources"]}
    assert {"validatingadmissionpolicies", "validatingadmissionpolicybindings"} <= names
    status, created = http("POST", VAP_PATH, policy())
    assert status == 201, created
    assert created["spec"]["failurePolicy"] == "Fail"
    assert created["spec"]["matchConstraints"]["matchPolicy"] == "Equivalent"
    selector = {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}
    bound = binding(
        policyName="gpu-per-pod",
        validationActions=["Deny"],
        matchResources={"namespaceSelector": selector},
    )
    status, created = http("POST", VAPB_PATH, bound)
    assert status == 201, created
    assert _apply(http, VAPB_PATH, bound)[0] == 200


@pytest.mark.parametrize("write", CREATES)
def test_policy_expression_must_compile(http: Http, write: Write) -> None:
    status, answer = write(http, VAP_PATH, policy("object.spec.containers.all(c, "))
    assert_invalid(status, answer, "spec.validations[0].expression", "compilation failed")
    status, answer = write(http, VAP_PATH, policy("object.spec.noSuchFunction()"))
    assert_invalid(
        status, answer, "spec.validations[0].expression", "undeclared reference to 'noSuchFunction'"
    )


def test_policy_needs_validations_and_match_constraints(http: Http) -> None:
    bare = policy()
    del bare["spec"]["validations"]
    del bare["spec"]["matchConstraints"]
    status, answer = http("POST", VAP_PATH, bare)
    assert_invalid(status, answer, "spec.validations", "must contain at least one item")
    assert_invalid(status, answer, "spec.matchConstraints", "Required value")
    bad = policy(validations=[{"expression": "true", "messageExpression": "'a' +"}])
    status, answer = http("POST", VAP_PATH, bad)
    assert_invalid(status, answer, "spec.validations[0].messageExpression", "compilation failed")


@pytest.mark.parametrize("write", CREATES)
def test_binding_rules(http: Http, write: Write) -> None:
    status, answer = write(http, VAPB_PATH, binding(validationActions=["Deny"]))
    assert_invalid(status, answer, "spec.policyName", "Required value")
    status, answer = write(http, VAPB_PATH, binding(policyName="p", validationActions=["Block"]))
    assert_invalid(status, answer, "spec.validationActions[0]", 'Unsupported value: "Block"')
    status, answer = write(http, VAPB_PATH, binding(policyName="p"))
    assert_invalid(status, answer, "spec.validationActions", "at least one validation action")
    both = binding(policyName="p", validationActions=["Deny", "Warn"])
    status, answer = write(http, VAPB_PATH, both)
    assert_invalid(status, answer, "spec.validationActions", "must not contain both Deny and Warn")


# -- CRD CEL rules ------------------------------------------------------------------------


def cluster_queue(
    *, cohort: str | None = None, borrowing: bool = True, version: str = "v1beta2"
) -> dict[str, Any]:
    resource: dict[str, Any] = {"name": "nvidia.com/gpu", "nominalQuota": 4}
    if borrowing:
        resource["borrowingLimit"] = 2
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "a100", "resources": [resource]}],
            }
        ],
    }
    if cohort:
        spec["cohortName" if version == "v1beta2" else "cohort"] = cohort
    return {
        "apiVersion": f"kueue.x-k8s.io/{version}",
        "kind": "ClusterQueue",
        "metadata": {"name": "team-a"},
        "spec": spec,
    }


@pytest.mark.parametrize("write", CREATES)
def test_cluster_queue_borrowing_without_cohort_is_refused(http: Http, write: Write) -> None:
    status, answer = write(http, CQ_PATH, cluster_queue())
    assert_invalid(
        status,
        answer,
        "spec",
        "Invalid value: borrowingLimit must be nil when cohort is empty",
    )
    assert answer["details"]["group"] == "kueue.x-k8s.io"
    assert answer["message"].startswith('ClusterQueue.kueue.x-k8s.io "team-a" is invalid: spec:')
    assert write(http, CQ_PATH, cluster_queue(cohort="gpus"))[0] in (200, 201)


def test_cluster_queue_rule_holds_in_v1beta1_too(http: Http) -> None:
    path = "/apis/kueue.x-k8s.io/v1beta1/clusterqueues"
    status, answer = http("POST", path, cluster_queue(version="v1beta1"))
    assert_invalid(status, answer, "spec", "borrowingLimit must be nil when cohort is empty")
    assert http("POST", path, cluster_queue(version="v1beta1", cohort="gpus"))[0] == 201


@pytest.mark.parametrize("write", UPDATES)
def test_cluster_queue_update_dropping_the_cohort_is_refused(http: Http, write: Write) -> None:
    # Created by the same field manager, so that its apply without cohortName removes it.
    create = _apply_create if write is _apply else _create
    assert create(http, CQ_PATH, cluster_queue(cohort="gpus"))[0] == 201
    if write is _merge_patch:
        # A merge patch without cohortName would keep it: drop it explicitly.
        patch = {"spec": {"cohortName": None}}
        status, answer = http("PATCH", CQ_PATH + "/team-a", patch, "application/merge-patch+json")
    else:
        status, answer = write(http, CQ_PATH, cluster_queue())
    assert_invalid(status, answer, "spec", "borrowingLimit must be nil when cohort is empty")


def test_flavors_must_cover_every_resource(http: Http) -> None:
    queue = cluster_queue(cohort="gpus", borrowing=False)
    queue["spec"]["resourceGroups"][0]["coveredResources"].append("cpu")
    status, answer = http("POST", CQ_PATH, queue)
    assert_invalid(
        status,
        answer,
        "spec.resourceGroups[0]",
        "flavors must have the same number of resources as the coveredResources",
    )


def test_local_queue_cluster_queue_is_immutable(http: Http) -> None:
    lq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "team-a"},
        "spec": {"clusterQueue": "team-a"},
    }
    assert http("POST", LQ_PATH, lq)[0] == 201
    assert _apply(http, LQ_PATH, lq)[0] == 200  # unchanged: the transition rule holds
    moved = {**lq, "spec": {"clusterQueue": "team-b"}}
    status, answer = _apply(http, LQ_PATH, moved)
    # The rule's node is a string: its value is shown (an object's would not be).
    assert_invalid(
        status, answer, "spec.clusterQueue", 'Invalid value: "team-b": field is immutable'
    )


def test_preemption_rule_uses_schema_defaults(http: Http) -> None:
    queue = cluster_queue(cohort="gpus", borrowing=False)
    # reclaimWithinCohort defaults to Never, so borrowing within the cohort must be Never too.
    queue["spec"]["preemption"] = {"borrowWithinCohort": {"policy": "LowerPriority"}}
    status, answer = http("POST", CQ_PATH, queue)
    assert_invalid(
        status, answer, "spec.preemption", "reclaimWithinCohort=Never and borrowWithinCohort"
    )
    queue["spec"]["preemption"]["reclaimWithinCohort"] = "Any"
    assert http("POST", CQ_PATH, queue)[0] == 201


def _all_rules_in_crd_files() -> list[tuple[str, str, str]]:
    """(apiVersion, kind, rule) of every x-kubernetes-validations entry, found by a plain walk
    over the CRD files (independent of the server's own walk)."""
    found = []

    def walk(node: Any, api_version: str, kind: str) -> None:
        if isinstance(node, dict):
            for entry in node.get("x-kubernetes-validations") or []:
                found.append((api_version, kind, entry["rule"]))
            for value in node.values():
                walk(value, api_version, kind)
        elif isinstance(node, list):
            for value in node:
                walk(value, api_version, kind)

    for path in sorted(schema_dir().rglob("*.yaml")):
        for crd in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if not crd or crd.get("kind") != "CustomResourceDefinition":
                continue
            for version in crd["spec"]["versions"]:
                if version.get("served", True):
                    api_version = f"{crd['spec']['group']}/{version['name']}"
                    walk(version["schema"], api_version, crd["spec"]["names"]["kind"])
    return found


def test_every_crd_rule_compiles_and_is_evaluated() -> None:
    inventory = crd_rule_inventory()
    in_files = _all_rules_in_crd_files()
    assert in_files, "the CRDs carry CEL rules"
    assert sorted((r.api_version, r.kind, r.rule) for r in inventory) == sorted(in_files)
    not_evaluated = [(r.kind, r.rule, r.error) for r in inventory if not r.evaluated]
    assert not_evaluated == []


def test_a_rule_that_cannot_be_evaluated_is_never_passed(monkeypatch) -> None:
    kind_rules = crd_rules()[("kueue.x-k8s.io/v1beta2", "LocalQueue")]
    broken = CrdRule(
        "kueue.x-k8s.io/v1beta2", "LocalQueue", ("spec",), "self.unknownFn()", error="x"
    )
    monkeypatch.setattr(kind_rules, "rules", [*kind_rules.rules, broken])
    with pytest.raises(UnevaluatedRule):
        check_crd_rules(
            "kueue.x-k8s.io/v1beta2", "LocalQueue", {"spec": {"clusterQueue": "a"}}, None
        )


def test_crd_rule_error_is_a_500_not_a_pass(http: Http, monkeypatch) -> None:
    kind_rules = crd_rules()[("kueue.x-k8s.io/v1beta2", "LocalQueue")]
    broken = CrdRule(
        "kueue.x-k8s.io/v1beta2", "LocalQueue", ("spec",), "self.unknownFn()", error="x"
    )
    monkeypatch.setattr(kind_rules, "rules", [*kind_rules.rules, broken])
    lq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "team-a"},
        "spec": {"clusterQueue": "team-a"},
    }
    assert http("POST", LQ_PATH, lq)[0] == 500


def test_kubernetes_cel_library_functions() -> None:
    cases = {
        "quantity('500m').isLessThan(quantity('1'))": True,
        "quantity('2Gi').compareTo(quantity('2048Mi')) == 0": True,
        "quantity('1').add(quantity('500m')).isInteger()": False,
        "quantity('3').add(2).asInteger() == 5": True,
        "isQuantity('4') && !isQuantity('four')": True,
        "[1, 2, 3].isSorted() && ![2, 1].isSorted()": True,
        "[1, 2, 3].sum() == 6": True,
        "[quantity('1'), quantity('500m')].sum().asApproximateFloat() == 1.5": True,
        "'a,b'.split(',').join('-') == 'a-b'": True,
        "['x', 'y'].indexOf('y') == 1 && 'abc'.indexOf('c') == 2": True,
        "self.size() == 2": True,
    }
    for expression, expected in cases.items():
        result = evaluate(compile_expression(expression), {"self": to_cel({"a": 1, "b": 2})})
        assert bool(result) is expected, expression
    with pytest.raises(CelCompileError, match="undeclared reference to 'nope'"):
        compile_expression("nope(1)")


# -- Volcano's queue webhook ----------------------------------------------------------------


def queue(name: str, *, parent: str | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"weight": 1, "reclaimable": True, **spec}
    if parent:
        body["parent"] = parent
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": body,
    }


def assert_denied(status: int, answer: Any, text: str) -> None:
    assert status == 400, answer
    assert answer["kind"] == "Status" and answer["status"] == "Failure"
    assert answer["code"] == 400 and "reason" not in answer
    assert answer["message"].startswith(DENIED), answer["message"]
    assert text in answer["message"], answer["message"]


@pytest.mark.parametrize("write", CREATES)
def test_queue_with_half_a_gpu_is_denied(http: Http, write: Write) -> None:
    status, answer = write(http, QUEUES, queue("team-a", deserved={"nvidia.com/gpu": "6500m"}))
    assert_denied(
        status,
        answer,
        'requestBody.spec.deserved.nvidia.com/gpu: Invalid value: "6500m": must be an integer',
    )
    assert http("GET", QUEUES + "/team-a")[0] == 404


@pytest.mark.parametrize("write", UPDATES)
def test_queue_update_to_half_a_gpu_is_denied(http: Http, write: Write) -> None:
    assert http("POST", QUEUES, queue("team-a", capability={"nvidia.com/gpu": "8"}))[0] == 201
    status, answer = write(http, QUEUES, queue("team-a", capability={"nvidia.com/gpu": "7.5"}))
    assert_denied(status, answer, "capability.nvidia.com/gpu")


def test_queue_guarantee_deserved_capability_order(http: Http) -> None:
    spec = {"guarantee": {"resource": {"nvidia.com/gpu": "4"}}, "deserved": {"nvidia.com/gpu": "2"}}
    status, answer = http("POST", QUEUES, queue("team-a", **spec))
    assert_denied(
        status, answer, "deserved[nvidia.com/gpu]=2 must be >= guarantee[nvidia.com/gpu]=4"
    )
    spec = {"deserved": {"nvidia.com/gpu": "8"}, "capability": {"nvidia.com/gpu": "6"}}
    status, answer = http("POST", QUEUES, queue("team-a", **spec))
    assert_denied(
        status, answer, "deserved[nvidia.com/gpu]=8 must be <= capability[nvidia.com/gpu]=6"
    )
    status, answer = http("POST", QUEUES, queue("team-a", deserved={"nvidia.com/gpu": "-1"}))
    assert_denied(status, answer, "must be greater than or equal to 0")


def test_queue_weight_range_is_refused_by_the_schema(http: Http) -> None:
    status, answer = http("POST", QUEUES, queue("team-a", weight=65536))
    assert status == 422 and answer["details"]["causes"][0]["field"] == "spec.weight"


def _gpus(n: int | str) -> dict[str, str]:
    return {"nvidia.com/gpu": str(n)}


def test_queue_hierarchy_sums_and_ancestor_capability(http: Http) -> None:
    parent = queue("org", deserved=_gpus(6), guarantee={"resource": _gpus(4)}, capability=_gpus(8))
    assert http("POST", QUEUES, parent)[0] == 201
    first = queue("team-a", parent="org", deserved=_gpus(4), guarantee={"resource": _gpus(3)})
    assert http("POST", QUEUES, first)[0] == 201
    second = queue("team-b", parent="org", deserved=_gpus(3))
    status, answer = http("POST", QUEUES, second)
    assert_denied(
        status,
        answer,
        "parent queue org validation failed: sum of children's deserved "
        "(cpu 0.00, memory 0.00, nvidia.com/gpu 7000.00) exceeds parent's deserved limit "
        "(cpu 0.00, memory 0.00, nvidia.com/gpu 6000.00)",
    )
    status, answer = http("POST", QUEUES + "?dryRun=All", second)
    assert_denied(status, answer, "sum of children's deserved")
    greedy = queue("team-b", parent="org", deserved=_gpus(2), capability=_gpus(10))
    status, answer = http("POST", QUEUES, greedy)
    assert_denied(
        status, answer, "queue team-b capability[nvidia.com/gpu]=10000.00 exceeds its ancestor's"
    )
    fits = queue("team-b", parent="org", deserved=_gpus(2), capability=_gpus(8))
    assert http("POST", QUEUES, fits)[0] == 201
    # Shrinking the parent below its children is refused too; so is growing a child past it.
    smaller = queue("org", deserved=_gpus(5), guarantee={"resource": _gpus(4)}, capability=_gpus(8))
    status, answer = _apply(http, QUEUES, smaller)
    assert_denied(status, answer, "queue org validation failed: sum of children's deserved")
    grown = queue("team-a", parent="org", deserved=_gpus(4), guarantee={"resource": _gpus(5)})
    status, answer = _put(http, QUEUES, grown)
    assert_denied(status, answer, "guarantee")


def test_child_needs_its_parent_and_not_itself(http: Http) -> None:
    status, answer = http("POST", QUEUES, queue("team-a", parent="org"))
    assert_denied(status, answer, 'queue.scheduling.volcano.sh "org" not found')
    status, answer = http("POST", QUEUES, queue("team-a", parent="team-a"))
    assert_denied(status, answer, "queue team-a cannot use itself as parent")


def test_parent_with_children_cannot_be_deleted(http: Http) -> None:
    assert http("POST", QUEUES, queue("org", deserved=_gpus(4)))[0] == 201
    assert http("POST", QUEUES, queue("team-a", parent="org", deserved=_gpus(4)))[0] == 201
    status, answer = http("DELETE", QUEUES + "/org")
    assert_denied(
        status, answer, "queue org can not be deleted because it has 1 child queues: team-a"
    )
    status, answer = http("DELETE", QUEUES + "/org?dryRun=All")
    assert_denied(status, answer, "can not be deleted")
    assert http("DELETE", QUEUES + "/team-a")[0] == 200
    assert http("DELETE", QUEUES + "/org")[0] == 200


@pytest.mark.parametrize("name", ["root", "default"])
def test_root_and_default_queues_cannot_be_deleted(http: Http, name: str) -> None:
    assert http("POST", QUEUES, queue(name))[0] == 201
    status, answer = http("DELETE", f"{QUEUES}/{name}")
    assert_denied(status, answer, f"`{name}` queue can not be deleted")


def test_root_queue_resources_are_protected(http: Http) -> None:
    assert http("POST", QUEUES, queue("root", capability=_gpus(16)))[0] == 201
    status, answer = _put(http, QUEUES, queue("root", capability=_gpus(8)))
    assert_denied(status, answer, "root queue's resource attributes")


# -- clusters without a scheduler's CRDs ------------------------------------------------------


def test_older_kueue_without_v1beta2() -> None:
    server = SandboxServer(omit_api_versions=("kueue.x-k8s.io/v1beta2",)).start()
    try:
        http = Http(server)
        status, group = http("GET", "/apis/kueue.x-k8s.io")
        assert status == 200
        assert [v["version"] for v in group["versions"]] == ["v1beta1"]
        assert group["preferredVersion"]["version"] == "v1beta1"
        assert http("GET", "/apis/kueue.x-k8s.io/v1beta2")[0] == 404
        assert http("GET", CQ_PATH)[0] == 404
        assert http("POST", CQ_PATH, cluster_queue(cohort="gpus"))[0] == 404
        assert "apis/kueue.x-k8s.io/v1beta2" not in http("GET", "/openapi/v3")[1]["paths"]
        v1beta1 = "/apis/kueue.x-k8s.io/v1beta1/clusterqueues"
        assert http("POST", v1beta1, cluster_queue(version="v1beta1", cohort="gpus"))[0] == 201
    finally:
        server.stop()


def test_cluster_without_volcano() -> None:
    server = SandboxServer(omit_api_versions=["scheduling.volcano.sh/v1beta1"]).start()
    try:
        http = Http(server)
        groups = {g["name"] for g in http("GET", "/apis")[1]["groups"]}
        assert "scheduling.volcano.sh" not in groups and "kueue.x-k8s.io" in groups
        assert http("GET", "/apis/scheduling.volcano.sh")[0] == 404
        assert http("GET", "/apis/scheduling.volcano.sh/v1beta1")[0] == 404
        assert http("POST", QUEUES, queue("team-a"))[0] == 404
    finally:
        server.stop()


def test_omitting_an_unknown_version_is_an_error(capsys) -> None:
    with pytest.raises(ValueError, match="not a served API version: nope/v1"):
        SandboxServer(omit_api_versions=["nope/v1"])
    assert main(["--port", "0", "--omit-api-version", "nope/v1"]) == 2
    assert "nope/v1" in capsys.readouterr().err


def test_command_line_serves_without_the_omitted_versions() -> None:
    command = [
        sys.executable,
        "-m",
        "kubesandbox",
        "--port",
        "0",
        "--omit-api-version",
        "kueue.x-k8s.io/v1beta2",
        "--omit-api-version",
        "scheduling.volcano.sh/v1beta1",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        url = line.split("listening on ", 1)[1].split()[0]
        with urllib.request.urlopen(url + "/apis") as answer:
            groups = {g["name"]: g for g in json.load(answer)["groups"]}
        assert "scheduling.volcano.sh" not in groups
        assert [v["version"] for v in groups["kueue.x-k8s.io"]["versions"]] == ["v1beta1"]
    finally:
        process.terminate()
        process.wait(timeout=10)
