"""The sandbox over raw HTTP: status codes, resourceVersion, patches, server-side apply, dry-run,
validation, selectors, namespaces, persistence and auth, as kube-apiserver answers them."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest

from kubesandbox import SandboxServer
from tests.support.kube import APPLY, RQ_PATH, Http, namespace


@pytest.fixture
def http(kube_sandbox: SandboxServer) -> Http:
    client = Http(kube_sandbox)
    status, _ = client("POST", "/api/v1/namespaces", namespace("team-a"))
    assert status == 201
    return client


def quota(name: str = "gpu", gpus: str = "4", **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, **meta},
        "spec": {"hard": {"requests.nvidia.com/gpu": gpus}},
    }


def rv(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


# -- create / get / replace / delete ------------------------------------------------------


def test_create_then_already_exists(http: Http) -> None:
    status, created = http("POST", RQ_PATH, quota())
    assert status == 201
    meta = created["metadata"]
    assert meta["namespace"] == "team-a" and meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert meta["generation"] == 1 and rv(created) > 0
    status, error = http("POST", RQ_PATH, quota())
    assert status == 409
    assert (error["kind"], error["reason"], error["code"]) == ("Status", "AlreadyExists", 409)
    assert error["message"] == 'resourcequotas "gpu" already exists'


def test_get_missing_is_404(http: Http) -> None:
    status, error = http("GET", RQ_PATH + "/nope")
    assert status == 404
    assert error["reason"] == "NotFound" and error["message"] == 'resourcequotas "nope" not found'
    status, error = http("GET", "/apis/scheduling.volcano.sh/v1beta1/queues/nope")
    assert status == 404 and error["message"] == 'queues.scheduling.volcano.sh "nope" not found'
    assert http("GET", "/api/v1/gadgets")[0] == 404


def test_resource_version_increases_and_stale_put_conflicts(
    http: Http, kube_sandbox: SandboxServer
) -> None:
    _, first = http("POST", RQ_PATH, quota())
    first["spec"]["hard"]["requests.nvidia.com/gpu"] = "6"
    status, second = http("PUT", RQ_PATH + "/gpu", first)
    assert status == 200 and rv(second) > rv(first)
    assert second["metadata"]["generation"] == 2
    assert second["metadata"]["uid"] == first["metadata"]["uid"]
    first["spec"]["hard"]["requests.nvidia.com/gpu"] = "8"
    status, error = http("PUT", RQ_PATH + "/gpu", first)  # carries the old resourceVersion
    assert status == 409 and error["reason"] == "Conflict"
    assert (
        "the object has been modified; please apply your changes to the latest version"
        in error["message"]
    )
    assert http("GET", RQ_PATH + "/gpu")[1]["spec"]["hard"]["requests.nvidia.com/gpu"] == "6"
    # Without a resourceVersion the update is unconditional.
    del first["metadata"]["resourceVersion"]
    status, third = http("PUT", RQ_PATH + "/gpu", first)
    assert status == 200 and third["spec"]["hard"]["requests.nvidia.com/gpu"] == "8"


def test_put_without_change_is_a_no_op(http: Http, kube_sandbox: SandboxServer) -> None:
    _, created = http("POST", RQ_PATH, quota())
    writes = kube_sandbox.stats.writes
    status, same = http("PUT", RQ_PATH + "/gpu", created)
    assert (
        status == 200
        and same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    )
    assert kube_sandbox.stats.writes == writes


def test_put_missing_and_name_mismatch(http: Http) -> None:
    assert http("PUT", RQ_PATH + "/gpu", quota())[0] == 404
    http("POST", RQ_PATH, quota())
    status, error = http("PUT", RQ_PATH + "/gpu", quota(name="other"))
    assert status == 400 and "does not match the name on the URL" in error["message"]


def test_body_kind_or_namespace_mismatch_is_400(http: Http) -> None:
    wrong_kind = {**quota(), "kind": "LimitRange"}
    assert http("POST", RQ_PATH, wrong_kind)[0] == 400
    wrong_version = {**quota(), "apiVersion": "v2"}
    assert http("POST", RQ_PATH, wrong_version)[0] == 400
    status, error = http("POST", RQ_PATH, quota(namespace="team-b"))
    assert status == 400 and "namespace" in error["message"]


def test_delete(http: Http, kube_sandbox: SandboxServer) -> None:
    http("POST", RQ_PATH, quota())
    status, deleted = http("DELETE", RQ_PATH + "/gpu")
    assert status == 200 and deleted["kind"] == "ResourceQuota"  # its OpenAPI says: the object
    assert http("GET", RQ_PATH + "/gpu")[0] == 404
    assert http("DELETE", RQ_PATH + "/gpu")[0] == 404
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}}
    assert http("POST", "/api/v1/namespaces/team-a/configmaps", cm)[0] == 201
    status, answer = http("DELETE", "/api/v1/namespaces/team-a/configmaps/c")
    assert status == 200 and (answer["kind"], answer["status"]) == ("Status", "Success")


def test_generate_name(http: Http) -> None:
    body = quota(name="")
    body["metadata"] = {"generateName": "gpu-"}
    status, created = http("POST", RQ_PATH, body)
    assert status == 201 and created["metadata"]["name"].startswith("gpu-")
    assert len(created["metadata"]["name"]) == len("gpu-") + 5


# -- patches ------------------------------------------------------------------------------


def test_merge_patch(http: Http) -> None:
    _, created = http("POST", RQ_PATH, quota(labels={"keep": "me", "drop": "me"}))
    patch = {"metadata": {"labels": {"drop": None}}, "spec": {"hard": {"cpu": "8"}}}
    status, patched = http("PATCH", RQ_PATH + "/gpu", patch, "application/merge-patch+json")
    assert status == 200
    assert patched["metadata"]["labels"] == {"keep": "me"}
    assert patched["spec"]["hard"] == {"requests.nvidia.com/gpu": "4", "cpu": "8"}
    assert rv(patched) > rv(created)


def test_strategic_merge_patch(http: Http) -> None:
    http("POST", RQ_PATH, quota(labels={"a": "1"}))

    def selector(value: str) -> dict[str, Any]:
        expression = {"scopeName": "PriorityClass", "operator": "In", "values": [value]}
        return {"matchExpressions": [expression]}

    patch = {
        "metadata": {"labels": {"b": "2"}},
        "spec": {"hard": {"requests.nvidia.com/gpu": "5"}, "scopeSelector": selector("x")},
    }
    status, patched = http(
        "PATCH", RQ_PATH + "/gpu", patch, "application/strategic-merge-patch+json"
    )
    assert status == 200
    assert patched["metadata"]["labels"] == {"a": "1", "b": "2"}
    assert patched["spec"]["hard"] == {"requests.nvidia.com/gpu": "5"}
    assert patched["spec"]["scopeSelector"] == selector("x")
    patch = {"metadata": {"labels": {"$patch": "delete"}}, "spec": {"scopeSelector": selector("y")}}
    _, patched = http("PATCH", RQ_PATH + "/gpu", patch, "application/strategic-merge-patch+json")
    assert "labels" not in patched["metadata"]
    assert patched["spec"]["scopeSelector"] == selector("y")


def test_strategic_merge_patch_is_refused_for_custom_resources(http: Http) -> None:
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {"weight": 1},
    }
    assert http("POST", "/apis/scheduling.volcano.sh/v1beta1/queues", queue)[0] == 201
    status, _ = http(
        "PATCH",
        "/apis/scheduling.volcano.sh/v1beta1/queues/q",
        {"spec": {"weight": 2}},
        "application/strategic-merge-patch+json",
    )
    assert status == 415


def test_json_patch(http: Http) -> None:
    http("POST", RQ_PATH, quota())
    ops = [
        {"op": "test", "path": "/spec/hard/requests.nvidia.com~1gpu", "value": "4"},
        {"op": "replace", "path": "/spec/hard/requests.nvidia.com~1gpu", "value": "7"},
        {"op": "add", "path": "/metadata/labels", "value": {"x": "y"}},
    ]
    status, patched = http("PATCH", RQ_PATH + "/gpu", ops, "application/json-patch+json")
    assert status == 200
    assert patched["spec"]["hard"]["requests.nvidia.com/gpu"] == "7" and patched["metadata"][
        "labels"
    ] == {"x": "y"}
    failing = [{"op": "test", "path": "/spec/hard/requests.nvidia.com~1gpu", "value": "4"}]
    status, error = http("PATCH", RQ_PATH + "/gpu", failing, "application/json-patch+json")
    assert status == 422 and error["reason"] == "Invalid"


def test_patch_missing_object_is_404(http: Http) -> None:
    status, _ = http("PATCH", RQ_PATH + "/nope", {"spec": {}}, "application/merge-patch+json")
    assert status == 404


def test_patch_with_stale_resource_version_conflicts(http: Http) -> None:
    _, created = http("POST", RQ_PATH, quota())
    http(
        "PATCH", RQ_PATH + "/gpu", {"spec": {"hard": {"cpu": "1"}}}, "application/merge-patch+json"
    )
    stale = {
        "metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
        "spec": {"hard": {"cpu": "2"}},
    }
    assert http("PATCH", RQ_PATH + "/gpu", stale, "application/merge-patch+json")[0] == 409


def test_generation_only_moves_with_spec(http: Http) -> None:
    _, created = http("POST", RQ_PATH, quota())
    _, labelled = http(
        "PATCH",
        RQ_PATH + "/gpu",
        {"metadata": {"labels": {"a": "b"}}},
        "application/merge-patch+json",
    )
    assert labelled["metadata"]["generation"] == 1 and rv(labelled) > rv(created)
    _, changed = http(
        "PATCH", RQ_PATH + "/gpu", {"spec": {"hard": {"cpu": "1"}}}, "application/merge-patch+json"
    )
    assert changed["metadata"]["generation"] == 2


# -- server-side apply ----------------------------------------------------------------------

APPLIED = """apiVersion: v1
kind: ResourceQuota
metadata:
  name: gpu
  namespace: team-a
  labels:
    app.kubernetes.io/managed-by: portal
spec:
  hard:
    requests.nvidia.com/gpu: "4"
    limits.nvidia.com/gpumem: "40Gi"
"""


def apply(
    http: Http, body: str, manager: str = "portal", *, force: bool = False, extra: str = ""
) -> tuple[int, Any]:
    query = f"?fieldManager={manager}" + ("&force=true" if force else "") + extra
    return http("PATCH", RQ_PATH + "/gpu" + query, body, APPLY)


def test_apply_creates_then_is_idempotent(http: Http, kube_sandbox: SandboxServer) -> None:
    status, created = apply(http, APPLIED)
    assert status == 201
    assert created["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "4",
        "limits.nvidia.com/gpumem": "40Gi",
    }
    [entry] = created["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["fieldsType"], entry["apiVersion"]) == (
        "portal",
        "Apply",
        "FieldsV1",
        "v1",
    )
    assert entry["fieldsV1"] == {
        "f:metadata": {"f:labels": {"f:app.kubernetes.io/managed-by": {}}},
        "f:spec": {"f:hard": {"f:limits.nvidia.com/gpumem": {}, "f:requests.nvidia.com/gpu": {}}},
    }
    writes = kube_sandbox.stats.writes
    status, again = apply(http, APPLIED)
    assert status == 200
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert kube_sandbox.stats.writes == writes


def test_apply_conflict_between_managers_and_force(http: Http) -> None:
    apply(http, APPLIED)
    other = APPLIED.replace('gpu: "4"', 'gpu: "9"')
    status, error = apply(http, other, manager="capacity-script")
    assert status == 409 and error["reason"] == "Conflict"
    assert error["message"].startswith('Apply failed with 1 conflict: conflict with "portal"')
    assert error["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "portal" using v1',
            "field": ".spec.hard.requests.nvidia.com/gpu",
        }
    ]
    assert http("GET", RQ_PATH + "/gpu")[1]["spec"]["hard"]["requests.nvidia.com/gpu"] == "4"
    # The same value is shared ownership, not a conflict.
    assert apply(http, APPLIED, manager="auditor")[0] == 200
    status, forced = apply(http, other, manager="capacity-script", force=True)
    assert status == 200 and forced["spec"]["hard"]["requests.nvidia.com/gpu"] == "9"
    owners = {e["manager"]: e["fieldsV1"] for e in forced["metadata"]["managedFields"]}
    assert "f:requests.nvidia.com/gpu" in owners["capacity-script"]["f:spec"]["f:hard"]
    assert "f:requests.nvidia.com/gpu" not in owners["portal"]["f:spec"]["f:hard"]
    # The portal applying its old value now conflicts with the new owner.
    status, error = apply(http, APPLIED)
    assert status == 409 and 'conflict with "capacity-script"' in error["message"]


def test_apply_removes_fields_dropped_from_the_config(http: Http) -> None:
    apply(http, APPLIED)
    smaller = APPLIED.replace('    limits.nvidia.com/gpumem: "40Gi"\n', "").replace(
        "  labels:\n    app.kubernetes.io/managed-by: portal\n", ""
    )
    status, applied = apply(http, smaller)
    assert status == 200
    assert applied["spec"]["hard"] == {"requests.nvidia.com/gpu": "4"}
    assert "labels" not in applied["metadata"]


def test_apply_keeps_dropped_fields_another_manager_owns(http: Http) -> None:
    apply(http, APPLIED)
    apply(
        http,
        APPLIED.replace('gpu: "4"\n    limits', 'gpu: "4"\n    cpu: "2"\n    limits'),
        manager="ops",
    )
    smaller = APPLIED.replace('    limits.nvidia.com/gpumem: "40Gi"\n', "")
    apply(http, smaller.replace('gpu: "4"', 'gpu: "4"\n    cpu: "2"'), manager="ops")
    _, result = apply(http, smaller)
    # gpumem: dropped by both -> removed; cpu: still applied by "ops" -> kept.
    assert result["spec"]["hard"] == {"requests.nvidia.com/gpu": "4", "cpu": "2"}


def test_apply_takes_over_fields_of_a_non_apply_writer_only_with_force(http: Http) -> None:
    http("POST", RQ_PATH + "?fieldManager=kubectl-create", quota())
    status, error = apply(http, APPLIED.replace('"4"', '"5"'))
    assert status == 409 and 'conflict with "kubectl-create"' in error["message"]
    assert apply(http, APPLIED.replace('"4"', '"5"'), force=True)[0] == 200


def test_apply_requires_field_manager_and_matching_name(http: Http) -> None:
    status, error = http("PATCH", RQ_PATH + "/gpu", APPLIED, APPLY)
    assert status == 422 and "fieldManager" in error["message"]
    status, _ = http("PATCH", RQ_PATH + "/other?fieldManager=portal", APPLIED, APPLY)
    assert status == 400


def test_apply_accepts_json_bodies(http: Http) -> None:
    status, created = http(
        "PATCH", RQ_PATH + "/gpu?fieldManager=portal", json.dumps(quota()), APPLY
    )
    assert status == 201 and created["spec"]["hard"]["requests.nvidia.com/gpu"] == "4"


# -- dry run ------------------------------------------------------------------------------


def test_dry_run_persists_nothing(http: Http, kube_sandbox: SandboxServer) -> None:
    writes = kube_sandbox.stats.writes
    status, answer = http("POST", RQ_PATH + "?dryRun=All", quota())
    assert status == 201 and answer["metadata"]["uid"]
    assert http("GET", RQ_PATH + "/gpu")[0] == 404
    status, _ = apply(http, APPLIED, extra="&dryRun=All")
    assert status == 201 and http("GET", RQ_PATH + "/gpu")[0] == 404
    assert kube_sandbox.stats.writes == writes
    _, created = http("POST", RQ_PATH, quota())
    writes = kube_sandbox.stats.writes
    changed = {**created, "spec": {"hard": {"requests.nvidia.com/gpu": "99"}}}
    status, answer = http("PUT", RQ_PATH + "/gpu?dryRun=All", changed)
    assert status == 200 and answer["spec"]["hard"]["requests.nvidia.com/gpu"] == "99"
    status, _ = http(
        "PATCH",
        RQ_PATH + "/gpu?dryRun=All",
        {"spec": {"hard": {"cpu": "1"}}},
        "application/merge-patch+json",
    )
    assert status == 200
    assert http("DELETE", RQ_PATH + "/gpu?dryRun=All")[0] == 200
    current = http("GET", RQ_PATH + "/gpu")[1]
    assert (
        current["spec"] == created["spec"]
        and current["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    )
    assert kube_sandbox.stats.writes == writes
    # Dry run still validates.
    assert http("POST", RQ_PATH + "?dryRun=All", quota(name="bad", gpus="ten"))[0] == 422


# -- validation and namespaces ------------------------------------------------------------------


def test_invalid_object_is_422_naming_the_field(http: Http) -> None:
    status, error = http("POST", RQ_PATH, quota(gpus="ten"))
    assert status == 422 and error["reason"] == "Invalid"
    assert error["message"].startswith(
        'ResourceQuota "gpu" is invalid: spec.hard[requests.nvidia.com/gpu]: '
        'Invalid value: "ten": quantities must match'
    )
    [cause] = error["details"]["causes"]
    assert (
        cause["field"] == "spec.hard[requests.nvidia.com/gpu]"
        and cause["reason"] == "FieldValueInvalid"
    )
    assert http("GET", RQ_PATH + "/gpu")[0] == 404
    _, created = http("POST", RQ_PATH, quota())
    bad_patch = {"spec": {"hard": {"cpu": "lots"}}}
    assert http("PATCH", RQ_PATH + "/gpu", bad_patch, "application/merge-patch+json")[0] == 422
    assert (
        http("GET", RQ_PATH + "/gpu")[1]["metadata"]["resourceVersion"]
        == created["metadata"]["resourceVersion"]
    )


def test_unknown_field_is_a_strict_decoding_error(http: Http) -> None:
    body = quota()
    body["spec"]["hardd"] = {}
    status, error = http("POST", RQ_PATH, body)
    assert status == 400 and error["reason"] == "BadRequest"
    assert 'strict decoding error: unknown field "spec.hardd"' in error["message"]


def test_namespace_must_exist(http: Http) -> None:
    status, error = http("POST", "/api/v1/namespaces/team-x/resourcequotas", quota())
    assert status == 404 and error["message"] == 'namespaces "team-x" not found'
    assert error["details"] == {"name": "team-x", "kind": "namespaces"}


def test_default_namespaces_exist_and_are_protected(http: Http) -> None:
    _, listed = http("GET", "/api/v1/namespaces")
    names = {item["metadata"]["name"] for item in listed["items"]}
    assert {"default", "kube-system", "kube-public", "team-a"} <= names
    assert http("DELETE", "/api/v1/namespaces/default")[0] == 403


def test_namespace_deletion_cascades(http: Http) -> None:
    http("POST", RQ_PATH, quota())
    lq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "lq"},
        "spec": {"clusterQueue": "cq"},
    }
    assert http("POST", "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues", lq)[0] == 201
    http("POST", "/api/v1/namespaces", namespace("team-b"))
    http("POST", "/api/v1/namespaces/team-b/resourcequotas", quota())
    status, gone = http("DELETE", "/api/v1/namespaces/team-a")
    assert status == 200 and gone["status"]["phase"] == "Terminating"
    assert http("GET", "/api/v1/namespaces/team-a")[0] == 404
    assert http("GET", RQ_PATH + "/gpu")[0] == 404
    assert http("GET", "/apis/kueue.x-k8s.io/v1beta2/localqueues")[1]["items"] == []
    assert len(http("GET", "/api/v1/resourcequotas")[1]["items"]) == 1


# -- lists and selectors --------------------------------------------------------------------


def test_list_kind_resource_version_and_all_namespaces(http: Http) -> None:
    http("POST", "/api/v1/namespaces", namespace("team-b"))
    http("POST", RQ_PATH, quota())
    http("POST", "/api/v1/namespaces/team-b/resourcequotas", quota())
    status, listed = http("GET", "/api/v1/resourcequotas")
    assert status == 200 and listed["kind"] == "ResourceQuotaList" and listed["apiVersion"] == "v1"
    assert int(listed["metadata"]["resourceVersion"]) >= max(rv(i) for i in listed["items"])
    assert [i["metadata"]["namespace"] for i in listed["items"]] == ["team-a", "team-b"]
    assert len(http("GET", RQ_PATH)[1]["items"]) == 1


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("tier=gold", ["a"]),
        ("tier==gold", ["a"]),
        ("tier!=gold", ["b", "c"]),
        ("tier in (gold,silver)", ["a", "b"]),
        ("tier notin (gold)", ["b", "c"]),
        ("tier", ["a", "b"]),
        ("!tier", ["c"]),
        ("tier,team=x", ["a"]),
    ],
)
def test_label_selectors(http: Http, selector: str, expected: list[str]) -> None:
    labels = {"a": {"tier": "gold", "team": "x"}, "b": {"tier": "silver"}, "c": {"team": "x"}}
    for name, value in labels.items():
        http("POST", "/api/v1/namespaces", namespace(f"sel-{name}", value))
    _, listed = http("GET", "/api/v1/namespaces?labelSelector=" + quote(selector))
    names = [i["metadata"]["name"] for i in listed["items"]]
    assert [n.removeprefix("sel-") for n in names if n.startswith("sel-")] == expected


def test_pods_with_status_and_field_selectors(http: Http) -> None:
    http("POST", "/api/v1/namespaces", namespace("team-b"))
    for ns, name, phase in (
        ("team-a", "run", "Running"),
        ("team-a", "wait", "Pending"),
        ("team-b", "run", "Running"),
    ):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"gpu": "yes"}},
            "spec": {
                "containers": [
                    {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                ]
            },
            "status": {"phase": phase},
        }
        assert http("POST", f"/api/v1/namespaces/{ns}/pods", pod)[0] == 201
    _, running = http(
        "GET", "/api/v1/pods?fieldSelector=status.phase%3DRunning&labelSelector=gpu%3Dyes"
    )
    assert [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in running["items"]] == [
        ("team-a", "run"),
        ("team-b", "run"),
    ]
    _, not_running = http(
        "GET", "/api/v1/namespaces/team-a/pods?fieldSelector=status.phase!%3DRunning"
    )
    assert [p["metadata"]["name"] for p in not_running["items"]] == ["wait"]
    _, by_name = http(
        "GET", "/api/v1/pods?fieldSelector=metadata.name%3Dwait,metadata.namespace%3Dteam-a"
    )
    assert len(by_name["items"]) == 1
    assert http("GET", "/api/v1/pods?fieldSelector=spec.bogus%3Dx")[0] == 400


def test_list_pagination(http: Http) -> None:
    for i in range(5):
        http("POST", RQ_PATH, quota(name=f"q{i}"))
    _, page = http("GET", RQ_PATH + "?limit=2")
    names = [i["metadata"]["name"] for i in page["items"]]
    while page["metadata"].get("continue"):
        _, page = http("GET", RQ_PATH + "?limit=2&continue=" + page["metadata"]["continue"])
        names += [i["metadata"]["name"] for i in page["items"]]
    assert names == [f"q{i}" for i in range(5)]


# -- custom resources, status, discovery ----------------------------------------------------------


def test_crd_versions_share_storage(http: Http) -> None:
    cq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {"namespaceSelector": {}},
    }
    assert http("POST", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues", cq)[0] == 201
    status, seen = http("GET", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/cq")
    assert status == 200 and seen["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert (
        http(
            "POST",
            "/apis/kueue.x-k8s.io/v1beta1/clusterqueues",
            {**cq, "apiVersion": "kueue.x-k8s.io/v1beta1"},
        )[0]
        == 409
    )


def test_status_subresource(http: Http) -> None:
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {"weight": 1},
        "status": {"state": "Open"},
    }
    _, created = http("POST", "/apis/scheduling.volcano.sh/v1beta1/queues", queue)
    assert "status" not in created  # status is ignored on the main resource
    status, updated = http(
        "PATCH",
        "/apis/scheduling.volcano.sh/v1beta1/queues/q/status",
        {"status": {"state": "Closed"}},
        "application/merge-patch+json",
    )
    assert status == 200 and updated["status"] == {"state": "Closed"}
    _, respec = http(
        "PATCH",
        "/apis/scheduling.volcano.sh/v1beta1/queues/q",
        {"spec": {"weight": 3}, "status": {"state": "Open"}},
        "application/merge-patch+json",
    )
    assert respec["status"] == {"state": "Closed"} and respec["spec"]["weight"] == 3


def test_discovery(http: Http) -> None:
    _, core = http("GET", "/api/v1")
    assert core["groupVersion"] == "v1" and core["kind"] == "APIResourceList"
    by_name = {r["name"]: r for r in core["resources"]}
    assert (
        by_name["resourcequotas"]["shortNames"] == ["quota"]
        and by_name["resourcequotas"]["namespaced"]
    )
    assert by_name["namespaces"]["kind"] == "Namespace" and not by_name["namespaces"]["namespaced"]
    assert "resourcequotas/status" in by_name
    _, groups = http("GET", "/apis")
    preferred = {g["name"]: g["preferredVersion"]["version"] for g in groups["groups"]}
    assert (
        preferred["kueue.x-k8s.io"] == "v1beta2" and preferred["scheduling.volcano.sh"] == "v1beta1"
    )
    _, kueue = http("GET", "/apis/kueue.x-k8s.io/v1beta2")
    assert {r["name"] for r in kueue["resources"]} >= {
        "clusterqueues",
        "localqueues",
        "resourceflavors",
        "cohorts",
    }
    assert http("GET", "/version")[1]["major"] == "1"
    assert http("GET", "/healthz") == (200, "ok")
    _, index = http("GET", "/openapi/v3")
    url = index["paths"]["apis/kueue.x-k8s.io/v1beta2"]["serverRelativeURL"]
    status, doc = http("GET", url)
    assert status == 200 and "io.x-k8s.kueue.v1beta2.LocalQueue" in doc["components"]["schemas"]


# -- state file and auth --------------------------------------------------------------------


def test_state_file_survives_restart(tmp_path: Any) -> None:
    state = tmp_path / "state.json"
    first = SandboxServer(state_file=state).start()
    try:
        client = Http(first)
        client("POST", "/api/v1/namespaces", namespace("team-a"))
        _, created = client("POST", RQ_PATH, quota())
    finally:
        first.stop()
    second = SandboxServer(state_file=state).start()
    try:
        client = Http(second)
        status, loaded = client("GET", RQ_PATH + "/gpu")
        assert status == 200 and loaded == created
        _, newer = client(
            "PATCH",
            RQ_PATH + "/gpu",
            {"spec": {"hard": {"cpu": "1"}}},
            "application/merge-patch+json",
        )
        assert rv(newer) > rv(created)  # the counter survived too
    finally:
        second.stop()


def test_token_auth() -> None:
    server = SandboxServer(token="s3cret-token").start()
    try:
        anonymous = Http(server)
        for path in ("/api", "/apis", "/api/v1/namespaces", "/openapi/v3", "/sandbox/stats"):
            status, error = anonymous("GET", path)
            assert status == 401 and error["reason"] == "Unauthorized"
        assert Http(server, token="wrong")("GET", "/api/v1/namespaces")[0] == 401
        assert Http(server, token="s3cret-token")("GET", "/api/v1/namespaces")[0] == 200
        assert "s3cret-token" not in repr(server)
    finally:
        server.stop()


def test_reset_keeps_default_namespaces(http: Http, kube_sandbox: SandboxServer) -> None:
    http("POST", RQ_PATH, quota())
    kube_sandbox.reset()
    assert http("GET", "/api/v1/namespaces/team-a")[0] == 404
    assert http("GET", "/api/v1/namespaces/default")[0] == 200
    assert kube_sandbox.stats.writes == 0
