"""ValidatingAdmissionPolicies on the test server, as kube-apiserver applies them: which requests
a policy and its binding match, the CEL variables they see, and how Deny, Warn, failurePolicy,
message and messageExpression shape the answer; what the sandbox does not imitate (parameter
resources, Audit, auditAnnotations) it refuses on write."""

from __future__ import annotations

import json
from http.client import HTTPConnection
from typing import Any
from urllib.parse import urlsplit

import pytest

from kubesandbox import SandboxServer
from kubesandbox.core_validation import NOT_IMITATED
from tests.support.kube import namespace

VAP = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
VAPB = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
CM = "/api/v1/namespaces/{ns}/configmaps"


class Client:
    """JSON over HTTP, keeping the ``Warning`` header of the last answer."""

    def __init__(self, server: SandboxServer) -> None:
        url = urlsplit(server.url)
        self.conn = HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=10)
        self.warning: str | None = None

    def __call__(
        self, method: str, path: str, body: Any = None, ctype: str = "application/json"
    ) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        self.conn.request(method, path, body=data, headers={"Content-Type": ctype})
        response = self.conn.getresponse()
        raw = response.read()
        self.warning = response.getheader("Warning")
        return response.status, json.loads(raw) if raw else None


@pytest.fixture
def api(kube_sandbox: SandboxServer) -> Client:
    client = Client(kube_sandbox)
    assert client("POST", "/api/v1/namespaces", namespace("prod", {"env": "prod"}))[0] == 201
    assert client("POST", "/api/v1/namespaces", namespace("dev", {"env": "dev"}))[0] == 201
    return client


def rule(resources: list[str], operations: list[str], group: str = "", version: str = "v1"):
    return {
        "apiGroups": [group],
        "apiVersions": [version],
        "operations": operations,
        "resources": resources,
    }


def install(
    api: Client,
    validations: list[dict[str, Any]],
    *,
    rules: list[dict[str, Any]] | None = None,
    actions: tuple[str, ...] = ("Deny",),
    binding: dict[str, Any] | None = None,
    **spec: Any,
) -> None:
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "p"},
        "spec": {
            "matchConstraints": {
                "resourceRules": rules or [rule(["configmaps"], ["CREATE", "UPDATE"])]
            },
            "validations": validations,
            **spec,
        },
    }
    status, answer = api("POST", VAP, policy)
    assert status == 201, answer
    bound = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "b"},
        "spec": {"policyName": "p", "validationActions": list(actions), **(binding or {})},
    }
    status, answer = api("POST", VAPB, bound)
    assert status == 201, answer


def config_map(name: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels or {}},
        "data": data,
    }


def create(api: Client, ns: str, obj: dict[str, Any]) -> tuple[int, Any]:
    return api("POST", CM.format(ns=ns), obj)


NO_BAD = {"expression": "!has(object.data) || !('bad' in object.data)", "message": "no bad key"}


def test_denial_is_worded_and_coded_as_upstream(api: Client) -> None:
    install(api, [NO_BAD])
    status, answer = create(api, "prod", config_map("c", bad="1"))
    message = "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: no bad key"
    assert status == 422
    assert answer == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'configmaps "c" is forbidden: {message}',
        "reason": "Invalid",
        "details": {"name": "c", "kind": "configmaps", "causes": [{"message": message}]},
        "code": 422,
    }
    assert create(api, "prod", config_map("c", good="1"))[0] == 201
    # Dry-run is admitted (or not) the same way; nothing is stored either way.
    assert api("POST", CM.format(ns="prod") + "?dryRun=All", config_map("d", bad="1"))[0] == 422


def test_reason_sets_the_code(api: Client) -> None:
    install(api, [{**NO_BAD, "reason": "Forbidden"}])
    status, answer = create(api, "prod", config_map("c", bad="1"))
    assert (status, answer["reason"]) == (403, "Forbidden")


def test_message_expression_then_message_then_the_expression(api: Client) -> None:
    install(
        api,
        [
            {"expression": "object.metadata.name != 'a'", "messageExpression": "'no ' + 'a'"},
            {
                "expression": "object.metadata.name != 'b'",
                "messageExpression": "object.metadata.noSuchField",
                "message": "no b",
            },
            {"expression": "object.metadata.name != 'c'"},
        ],
    )
    denied = "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: "
    assert create(api, "prod", config_map("a"))[1]["details"]["causes"][0]["message"] == (
        denied + "no a"
    )
    assert create(api, "prod", config_map("b"))[1]["details"]["causes"][0]["message"] == (
        denied + "no b"
    )
    assert create(api, "prod", config_map("c"))[1]["details"]["causes"][0]["message"] == (
        denied + "failed expression: object.metadata.name != 'c'"
    )


def test_rules_match_resource_operation_and_subresource(api: Client) -> None:
    deny_all = [{"expression": "false", "message": "no"}]
    install(api, deny_all, rules=[rule(["configmaps"], ["UPDATE"]), rule(["pods/status"], ["*"])])
    assert create(api, "prod", config_map("c"))[0] == 201  # CREATE is not in the rule
    status, _ = api("PUT", CM.format(ns="prod") + "/c", config_map("c", x="1"))
    assert status == 422
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "m", "image": "i"}]}}
    assert api("POST", "/api/v1/namespaces/prod/pods", pod)[0] == 201  # pods, not pods/status
    status, _ = api("PUT", "/api/v1/namespaces/prod/pods/p/status", {**pod, "status": {}})
    assert status == 422


def test_exclude_rules_resource_names_and_scope(api: Client) -> None:
    deny_all = [{"expression": "false"}]
    named = {**rule(["configmaps"], ["CREATE"]), "resourceNames": ["locked"]}
    cluster_only = {**rule(["*"], ["CREATE"]), "scope": "Cluster"}
    install(api, deny_all, rules=[named, cluster_only])
    assert create(api, "prod", config_map("free"))[0] == 201
    assert create(api, "prod", config_map("locked"))[0] == 422
    assert api("POST", "/api/v1/namespaces", namespace("new"))[0] == 422  # cluster-scoped
    assert api("DELETE", VAPB + "/b")[0] == 200
    assert api("DELETE", VAP + "/p")[0] == 200
    install(
        api,
        deny_all,
        rules=[rule(["*"], ["CREATE"])],
        matchConstraints={
            "resourceRules": [rule(["*"], ["CREATE"])],
            "excludeResourceRules": [rule(["configmaps"], ["*"])],
        },
    )
    assert create(api, "prod", config_map("excluded"))[0] == 201


def test_policies_and_bindings_are_never_held_by_policies(api: Client) -> None:
    everything = {**rule(["*"], ["*"], "*", "*")}
    install(api, [{"expression": "false"}], rules=[everything])
    status, _ = api("PATCH", VAP + "/p", {"metadata": {"labels": {"a": "b"}}}, MERGE)
    assert status == 200
    assert api("DELETE", VAPB + "/b")[0] == 200


MERGE = "application/merge-patch+json"


def test_namespace_and_object_selectors(api: Client) -> None:
    install(
        api,
        [NO_BAD],
        binding={
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"env": "prod"}},
                "objectSelector": {
                    "matchExpressions": [{"key": "checked", "operator": "NotIn", "values": ["no"]}]
                },
            }
        },
    )
    assert create(api, "prod", config_map("held", bad="1"))[0] == 422
    assert create(api, "dev", config_map("other-namespace", bad="1"))[0] == 201
    assert create(api, "prod", config_map("opted-out", {"checked": "no"}, bad="1"))[0] == 201


def test_namespace_selector_reads_the_namespace_itself_for_namespaces(api: Client) -> None:
    install(
        api,
        [{"expression": "false", "message": "no prod namespaces"}],
        rules=[rule(["namespaces"], ["CREATE"])],
        matchConstraints={
            "resourceRules": [rule(["namespaces"], ["CREATE"])],
            "namespaceSelector": {"matchLabels": {"env": "prod"}},
        },
    )
    assert api("POST", "/api/v1/namespaces", namespace("qa", {"env": "qa"}))[0] == 201
    assert api("POST", "/api/v1/namespaces", namespace("prod-2", {"env": "prod"}))[0] == 422


def test_variables_namespace_object_and_request(api: Client) -> None:
    install(
        api,
        [
            {
                "expression": "variables.limit == 'strict' ? !has(object.data) : true",
                "messageExpression": "request.operation + ' ' + request.resource.resource"
                " + ' in ' + namespaceObject.metadata.name + ' by ' + request.userInfo.username",
            }
        ],
        variables=[
            {"name": "labels", "expression": "namespaceObject.metadata.labels"},
            {
                "name": "limit",
                "expression": "'env' in variables.labels && variables.labels['env'] == 'prod'"
                " ? 'strict' : 'lax'",
            },
            # Never used, so never evaluated: its error does not matter.
            {"name": "broken", "expression": "object.noSuchField.deeper"},
        ],
    )
    status, answer = create(api, "prod", config_map("c", k="v"))
    assert status == 422
    assert answer["message"].endswith("CREATE configmaps in prod by system:admin")
    assert create(api, "dev", config_map("c", k="v"))[0] == 201


def test_old_object_on_update_and_delete(api: Client) -> None:
    install(
        api,
        [
            {
                "expression": "oldObject == null || object == null"
                " || object.data.v >= oldObject.data.v",
                "message": "v only grows",
            },
            {"expression": "object != null || oldObject.data.v != 'locked'", "message": "locked"},
        ],
        rules=[rule(["configmaps"], ["CREATE", "UPDATE", "DELETE"])],
    )
    assert create(api, "prod", config_map("c", v="5"))[0] == 201
    path = CM.format(ns="prod") + "/c"
    assert api("PATCH", path, {"data": {"v": "7"}}, MERGE)[0] == 200
    status, answer = api("PATCH", path, {"data": {"v": "6"}}, MERGE)
    assert status == 422 and answer["message"].endswith("denied request: v only grows")
    assert api("PATCH", path, {"data": {"v": "locked"}}, MERGE)[0] == 200
    status, answer = api("DELETE", path)
    assert status == 422 and answer["message"].endswith("denied request: locked")


def test_match_conditions(api: Client) -> None:
    install(
        api,
        [{"expression": "false", "message": "no"}],
        matchConditions=[
            {"name": "only-labelled", "expression": "'team' in object.metadata.labels"},
        ],
    )
    assert create(api, "prod", config_map("unlabelled"))[0] == 201
    assert create(api, "prod", config_map("labelled", {"team": "a"}))[0] == 422


def test_match_condition_error_follows_the_failure_policy(api: Client) -> None:
    condition = [{"name": "broken", "expression": "object.data.missing == 'x'"}]
    install(api, [{"expression": "false"}], matchConditions=condition)
    status, answer = create(api, "prod", config_map("c", k="v"))
    assert status == 422
    assert "expression 'object.data.missing == 'x'' resulted in error" in answer["message"]


@pytest.mark.parametrize(("failure_policy", "status"), [("Fail", 422), ("Ignore", 201)])
def test_evaluation_errors_follow_the_failure_policy(
    api: Client, failure_policy: str, status: int
) -> None:
    install(
        api,
        [{"expression": "object.data.missing == 'x'", "message": "never shown"}],
        failurePolicy=failure_policy,
    )
    got, answer = create(api, "prod", config_map("c", k="v"))
    assert got == status, answer
    if status == 422:
        assert answer["message"] == (
            "configmaps \"c\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' "
            "denied request: expression 'object.data.missing == 'x'' resulted in error: "
            + answer["message"].split("resulted in error: ", 1)[1]
        )
        assert "missing" in answer["message"].split("resulted in error: ", 1)[1]


def test_warn_adds_a_warning_header_and_admits(api: Client) -> None:
    install(api, [NO_BAD], actions=("Warn",))
    status, _ = create(api, "prod", config_map("c", bad="1"))
    assert status == 201
    assert api.warning == (
        "299 - \"Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': no bad key\""
    )
    assert create(api, "prod", config_map("d", good="1"))[0] == 201
    assert api.warning is None


@pytest.mark.parametrize(
    ("kind", "spec", "field"),
    [
        (VAP, {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}}, "spec.paramKind"),
        (
            VAP,
            {"auditAnnotations": [{"key": "owner", "valueExpression": "object.metadata.name"}]},
            "spec.auditAnnotations",
        ),
        (
            VAPB,
            {"paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"}},
            "spec.paramRef",
        ),
        (VAPB, {"validationActions": ["Audit"]}, "spec.validationActions[0]"),
    ],
)
def test_what_the_sandbox_does_not_imitate_is_refused(
    api: Client, kind: str, spec: dict[str, Any], field: str
) -> None:
    """Never passed unjudged: the real API server takes these (the portal writes none)."""
    if kind == VAP:
        body = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "p"},
            "spec": {
                "matchConstraints": {"resourceRules": [rule(["configmaps"], ["CREATE"])]},
                "validations": [{"expression": "true"}],
                **spec,
            },
        }
    else:
        body = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "b"},
            "spec": {"policyName": "p", "validationActions": ["Deny"], **spec},
        }
    status, answer = api("POST", kind, body)
    assert status == 422, answer
    causes = [(c["field"], c["message"]) for c in answer["details"]["causes"]]
    assert (field, NOT_IMITATED) in causes, causes


def test_warnings_come_with_a_denial_too(api: Client) -> None:
    install(api, [NO_BAD])
    second = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "a-warn"},
        "spec": {"policyName": "p", "validationActions": ["Warn"]},
    }
    assert api("POST", VAPB, second)[0] == 201
    status, answer = create(api, "prod", config_map("c", bad="1"))
    assert status == 422 and "with binding 'b' denied request" in answer["message"]
    assert api.warning is not None and "with binding 'a-warn': no bad key" in api.warning
