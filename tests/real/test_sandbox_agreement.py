"""One table of admission cases, run on the sandbox (``kubesandbox``) and on the real control
plane: the same objects, created in order with the portal's own client, get the same answer
from both, admitted or refused with the same HTTP status and a fragment of the message.

A row marked ``real_only`` is what only the real API server enforces (the sandbox does not
imitate it, for the reason the row gives): on the sandbox it asserts that the object is
admitted. A row marked ``not_imitated`` is what the real API server takes and the sandbox
refuses rather than pass unjudged. So the table records every difference and fails when either
side changes; the README's section on the sandbox points here for the list."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest

from kubesandbox.core_validation import NOT_IMITATED
from quotas.kube.client import KubeClient, KubeError
from quotas.kube.plan import (
    AllocationPlan,
    ClusterPlan,
    NamespacePlan,
    PriorityClassPlan,
    ResourcePlan,
    TeamPlan,
)
from quotas.kube.render import (
    render_cluster,
    render_namespace_object,
    render_per_pod_max_policy,
    render_priority_classes,
    render_resource_quotas,
)
from tests.support.waiting import poll

ADMITTED = "admitted"
DEADLINE = 120  # seconds; another control plane may share the machine's two cores
# The real cluster's reset() removes the cluster-scoped objects that carry this label.
LABELS = {"app.kubernetes.io/managed-by": "sandbox-agreement"}
NS = "agreement"
KUEUE = "kueue.x-k8s.io/v1beta2"
VOLCANO = "scheduling.volcano.sh/v1beta1"
NO_QUOTA_ADMISSION = (
    "the sandbox runs no quota controller and no ResourceQuota admission: it stores quotas "
    "and enforces none (tests/real/test_quota_admission.py proves them)"
)
UNUSED_POLICY_PART = "the portal's policies use none of it: the sandbox dropped its imitation"
NEWER_VOLCANO = (
    "the sandbox words Volcano's queue webhook as its v1.16 line does; the control plane runs "
    "v1.14.1 (the newest whose API types are published), which words it differently"
)


@dataclass(frozen=True)
class Case:
    """Create ``objects`` in order: all but the last must be admitted; the last gets the
    answer: admitted (``status`` None), or refused with ``status`` and ``fragment`` in the
    message (``sandbox_fragment`` instead on the sandbox, where its wording differs)."""

    name: str
    objects: tuple[dict, ...]
    status: int | None = None
    fragment: str = ""
    sandbox_fragment: str = ""
    # Why the sandbox words it otherwise (with sandbox_fragment).
    sandbox_wording: str = ""
    # Why the sandbox does not imitate this refusal (it admits the object instead).
    real_only: str = ""
    # Why the sandbox refuses this (422, NOT_IMITATED) where the real API server admits it.
    not_imitated: str = ""
    # The real API server loads admission policies asynchronously: before the last object it
    # waits until a server-side dry run of this one is refused.
    await_refusal_of: dict | None = None


# --------------------------------------------------------------------------------------------
# Objects


def namespace(name: str = NS) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def pod(
    name: str,
    *,
    limits: dict | None = None,
    requests: dict | None = None,
    priority_class: str | None = None,
    namespace: str = NS,
    **spec: Any,
) -> dict:
    container: dict[str, Any] = {"name": "main", "image": "busybox"}
    resources = {k: v for k, v in (("limits", limits), ("requests", requests)) if v}
    if resources:
        container["resources"] = resources
    spec["containers"] = [container]
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def gpus(n: str) -> dict:
    return {"nvidia.com/gpu": n}


def quota(name: str, hard: dict) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"hard": hard},
    }


def pod_policy(name: str, expression: str, **spec: Any) -> dict:
    """A ValidatingAdmissionPolicy on pod creation with one validation."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": LABELS},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                    }
                ]
            },
            "validations": [{"expression": expression, "message": "refused"}],
            **spec,
        },
    }


def gpu_quota(nominal: str, **limits: str) -> list[dict]:
    return [{"name": "nvidia.com/gpu", "nominalQuota": nominal, **limits}]


def resource_groups(resources: list[dict]) -> list[dict]:
    return [
        {
            "coveredResources": [r["name"] for r in resources],
            "flavors": [{"name": "agreement-a100", "resources": resources}],
        }
    ]


def cluster_queue(name: str, resources: list[dict], cohort: str | None = None) -> dict:
    spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": resource_groups(resources)}
    if cohort:
        spec["cohortName"] = cohort
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": _named(name), "spec": spec}


def cohort(name: str, resources: list[dict], parent: str | None = None) -> dict:
    spec: dict[str, Any] = {"resourceGroups": resource_groups(resources)}
    if parent:
        spec["parentName"] = parent
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": _named(name), "spec": spec}


def volcano_queue(name: str, **spec: Any) -> dict:
    return {
        "apiVersion": VOLCANO,
        "kind": "Queue",
        "metadata": _named(name),
        "spec": {"weight": 1, "reclaimable": True, **spec},
    }


def _named(name: str) -> dict:
    return {"name": name, "labels": LABELS}


# What the portal renders: a training and an inference team on 16 A100s, cpu and memory
# quota'd for the training team; cluster-scoped names are prefixed, each row owns its own.
GPU = ResourcePlan("nvidia.com/gpu", "gpu", gpu_model="A100 80GB")
CPU = ResourcePlan("cpu", "cpu")
MEMORY = ResourcePlan("memory", "memory", quantity_suffix="Gi")


def plan(*backends: str) -> ClusterPlan:
    def allocation(resource, guarantee, cap, per_pod=None, classes=()) -> AllocationPlan:
        return AllocationPlan(
            resource,
            Decimal(guarantee),
            Decimal(cap),
            None if per_pod is None else Decimal(per_pod),
            classes,
        )

    return ClusterPlan(
        name="agreement",
        backends=frozenset({"core", *backends}),
        capacities=((GPU, Decimal(16)), (CPU, Decimal(128)), (MEMORY, Decimal(1024))),
        namespaces=(
            NamespacePlan(
                "team-a-training",
                TeamPlan("team-a", "Team A"),
                "training",
                (
                    allocation(GPU, 10, 14, 8, ("agreement-training", "agreement-experiment")),
                    allocation(CPU, 8, 32, 4),
                    allocation(MEMORY, 16, 64),
                ),
            ),
            NamespacePlan(
                "team-b-inference",
                TeamPlan("team-b", "Team B"),
                "inference",
                (allocation(GPU, 6, 10, 2, ("agreement-serving",)),),
            ),
        ),
        priority_classes=(
            PriorityClassPlan("agreement-serving", 1000),
            PriorityClassPlan("agreement-training", 500),
            PriorityClassPlan("agreement-experiment", 100, preempts=False),
        ),
        kueue_cohort="agreement-root",
    )


CORE = plan()
INFERENCE = CORE.namespaces[1]
# The inference namespace with its quotas (gpu-quota and gpu-quota-other-classes, the latter
# scoped by PriorityClass NotIn [agreement-serving]) and the classes.
SCOPED_QUOTA = (
    render_namespace_object(CORE, INFERENCE),
    *render_priority_classes(CORE),
    *render_resource_quotas(CORE, INFERENCE),
)
# The inference namespace (per-pod max 2 GPUs) with the per-pod max policy and binding.
PER_POD_MAX = (render_namespace_object(CORE, INFERENCE), *render_per_pod_max_policy(CORE))
THREE_GPUS = pod("three", limits=gpus("3"), namespace=INFERENCE.name)


# --------------------------------------------------------------------------------------------
# The table

CASES = [
    # -- ResourceQuota admission
    Case(
        "quota-admits-a-pod-within-the-cap",
        (
            namespace(),
            quota("gpu-quota", {"requests.nvidia.com/gpu": "4"}),
            pod("four", limits=gpus("4")),
        ),
    ),
    Case(
        "quota-refuses-a-pod-above-the-cap",
        (
            namespace(),
            quota("gpu-quota", {"requests.nvidia.com/gpu": "4"}),
            pod("five", limits=gpus("5")),
        ),
        403,
        "exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=5, "
        "used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=4",
        real_only=NO_QUOTA_ADMISSION,
    ),
    Case(
        "scoped-quota-refuses-a-class-outside-the-allowed-set",
        (
            *SCOPED_QUOTA,
            pod(
                "train",
                limits=gpus("1"),
                priority_class="agreement-training",
                namespace=INFERENCE.name,
            ),
        ),
        403,
        "exceeded quota: gpu-quota-other-classes",
        real_only=NO_QUOTA_ADMISSION,
    ),
    Case(
        "scoped-quota-refuses-a-pod-without-a-class",
        (*SCOPED_QUOTA, pod("no-class", limits=gpus("1"), namespace=INFERENCE.name)),
        403,
        "exceeded quota: gpu-quota-other-classes",
        real_only=NO_QUOTA_ADMISSION,
    ),
    Case(
        "scoped-quota-admits-the-allowed-class",
        (
            *SCOPED_QUOTA,
            pod(
                "serve",
                limits=gpus("1"),
                priority_class="agreement-serving",
                namespace=INFERENCE.name,
            ),
        ),
    ),
    Case(
        "scoped-quota-admits-a-cpu-only-pod-of-another-class",
        (
            *SCOPED_QUOTA,
            pod(
                "cpu",
                requests={"cpu": "1"},
                priority_class="agreement-training",
                namespace=INFERENCE.name,
            ),
        ),
    ),
    # -- Priority admission
    Case(
        "priority-refuses-an-unknown-class",
        (namespace(), pod("unknown", priority_class="no-such-class")),
        403,
        'pods "unknown" is forbidden: no PriorityClass with name no-such-class was found',
    ),
    Case(
        "priority-refuses-a-pod-stating-another-priority",
        (
            namespace(),
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": _named("agreement-low"),
                "value": 10,
            },
            pod("stated", priority_class="agreement-low", priority=5),
        ),
        403,
        "the integer value of priority (5) must not be provided in pod spec; priority admission "
        "controller computed 10 from the given PriorityClass name",
    ),
    # -- Pod validation of resources
    Case(
        "pod-refuses-gpu-requests-without-limits",
        (namespace(), pod("requests-only", requests=gpus("1"))),
        422,
        'Pod "requests-only" is invalid: spec.containers[0].resources.limits: Required value: '
        "Limit must be set for non overcommitable resources",
    ),
    Case(
        "pod-refuses-a-fraction-of-a-gpu",
        (namespace(), pod("fraction", limits=gpus("1500m"))),
        422,
        'spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "1500m": must be an '
        "integer",
    ),
    Case(
        "pod-refuses-gpu-requests-different-from-limits",
        (namespace(), pod("differ", requests=gpus("1"), limits=gpus("2"))),
        422,
        'spec.containers[0].resources.requests: Invalid value: "1": must be equal to '
        "nvidia.com/gpu limit of 2",
    ),
    Case(
        "pod-refuses-cpu-requests-above-limits",
        (namespace(), pod("cpu-above", requests={"cpu": "2"}, limits={"cpu": "1"})),
        422,
        'spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal '
        "to cpu limit of 1",
    ),
    Case("pod-admits-gpu-limits", (namespace(), pod("limits-only", limits=gpus("2")))),
    # -- The per-pod max policy the portal renders
    Case(
        "per-pod-max-refuses-a-pod-above-the-max",
        (*PER_POD_MAX, THREE_GPUS),
        403,
        "above the per-pod max 2 of namespace team-b-inference",
        await_refusal_of=THREE_GPUS,
    ),
    Case(
        "per-pod-max-admits-a-pod-at-the-max",
        (*PER_POD_MAX, pod("two", limits=gpus("2"), namespace=INFERENCE.name)),
        await_refusal_of=THREE_GPUS,
    ),
    # -- CEL type checking of admission policies
    Case(
        "policy-refuses-an-unknown-field-of-namespace-object",
        (pod_policy("agreement-ns-field", "namespaceObject.spec.foo == 'x'"),),
        422,
        "spec.validations[0].expression: Invalid value: \"namespaceObject.spec.foo == 'x'\": "
        "compilation failed: ERROR: <input>:1:21: undefined field 'foo'",
    ),
    Case(
        "policy-refuses-an-unknown-field-of-request",
        (pod_policy("agreement-request-field", "request.userInfo.team == 'a'"),),
        422,
        "compilation failed: ERROR: <input>:1:17: undefined field 'team'",
    ),
    Case(
        "policy-refuses-a-field-of-a-string",
        (pod_policy("agreement-string-field", "namespaceObject.metadata.name.size > 0"),),
        422,
        "ERROR: <input>:1:30: type 'string' does not support field selection",
    ),
    Case(
        "policy-refuses-params-without-a-param-kind",
        (pod_policy("agreement-params", "params.data.max == '2'"),),
        422,
        "ERROR: <input>:1:1: undeclared reference to 'params' (in container '')",
    ),
    Case(
        "policy-refuses-an-undefined-variable",
        (
            pod_policy(
                "agreement-variables",
                "variables.gpus <= 2",
                variables=[{"name": "cpus", "expression": "1"}],
            ),
        ),
        422,
        "ERROR: <input>:1:10: undefined field 'gpus'",
    ),
    Case(
        "policy-refuses-an-undeclared-function",
        (pod_policy("agreement-function", "object.spec.containers.gpuCount() <= 2"),),
        422,
        "ERROR: <input>:1:32: undeclared reference to 'gpuCount' (in container '')",
    ),
    Case(
        "policy-admits-the-namespace-fields-it-has",
        (
            pod_policy(
                "agreement-ns-ok",
                "has(namespaceObject.metadata.annotations) && "
                "namespaceObject.metadata.labels['team'] != '' && "
                "namespaceObject.status.phase == 'Active'",
            ),
        ),
    ),
    Case(
        # Admitted by both; the real server then reports the unknown field as a type warning
        # in status.typeChecking (see the tests after the table).
        "policy-admits-an-unknown-field-of-object",
        (pod_policy("agreement-object-field", "object.spec.nothing == 'x'"),),
    ),
    Case(
        "policy-with-a-param-kind",
        (
            pod_policy(
                "agreement-param-kind",
                "object.spec.containers.size() <= int(params.data.containers)",
                paramKind={"apiVersion": "v1", "kind": "ConfigMap"},
            ),
        ),
        not_imitated=UNUSED_POLICY_PART,
    ),
    Case(
        "policy-with-audit-annotations",
        (
            pod_policy(
                "agreement-audit-annotations",
                "true",
                auditAnnotations=[
                    {"key": "owner", "valueExpression": "string(object.metadata.name)"}
                ],
            ),
        ),
        not_imitated=UNUSED_POLICY_PART,
    ),
    Case(
        "binding-with-the-audit-action",
        (
            pod_policy("agreement-audited", "true"),
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": _named("agreement-audited"),
                "spec": {"policyName": "agreement-audited", "validationActions": ["Audit"]},
            },
        ),
        not_imitated=UNUSED_POLICY_PART,
    ),
    # -- Kueue's webhooks and CRD rules
    Case(
        "cluster-queue-refuses-lending-above-nominal",
        (
            cluster_queue(
                "agreement-lend", gpu_quota("4", lendingLimit="5"), cohort="agreement-root"
            ),
        ),
        403,
        'admission webhook "vclusterqueue.kb.io" denied the request: '
        'spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: "5": '
        "must be less than or equal to the nominalQuota",
    ),
    Case(
        "cluster-queue-refuses-a-negative-nominal-quota",
        (cluster_queue("agreement-negative", gpu_quota("-1"), cohort="agreement-root"),),
        403,
        'spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: "-1": '
        "must be greater than or equal to 0",
    ),
    Case(
        "cluster-queue-refuses-borrowing-without-a-cohort",
        (cluster_queue("agreement-alone", gpu_quota("4", borrowingLimit="2")),),
        422,
        'ClusterQueue.kueue.x-k8s.io "agreement-alone" is invalid: spec: Invalid value: '
        "borrowingLimit must be nil when cohort is empty",
    ),
    Case(
        "cluster-queue-admits-limits-within-its-cohort",
        (
            cluster_queue(
                "agreement-ok",
                gpu_quota("4", borrowingLimit="2", lendingLimit="4"),
                cohort="agreement-root",
            ),
        ),
    ),
    Case(
        "root-cohort-refuses-a-borrowing-limit",
        (cohort("agreement-root-borrow", gpu_quota("4", borrowingLimit="2")),),
        403,
        'admission webhook "vcohort.kb.io" denied the request: '
        'spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: Invalid value: "2": '
        "must be nil when parent is empty",
    ),
    Case(
        "root-cohort-refuses-a-lending-limit",
        (cohort("agreement-root-lend", gpu_quota("4", lendingLimit="2")),),
        403,
        'lendingLimit: Invalid value: "2": must be nil when parent is empty',
    ),
    Case(
        "cohort-refuses-a-negative-nominal-quota",
        (cohort("agreement-negative-cohort", gpu_quota("-2"), parent="agreement-root"),),
        403,
        'nominalQuota: Invalid value: "-2": must be greater than or equal to 0',
    ),
    Case(
        # Kueue holds only ClusterQueues to lendingLimit <= nominalQuota.
        "child-cohort-admits-lending-above-nominal",
        (cohort("agreement-child", gpu_quota("4", lendingLimit="5"), parent="agreement-root"),),
    ),
    # -- Volcano's queue webhook
    Case(
        "volcano-refuses-a-fraction-of-a-gpu",
        (volcano_queue("agreement-fraction", capability=gpus("1500m")),),
        400,
        'denied the request: requestBody.spec.capability.nvidia.com/gpu: Invalid value: "1500m": '
        "must be an integer",
    ),
    Case(
        "volcano-refuses-a-missing-parent",
        (volcano_queue("agreement-orphan", parent="agreement-missing"),),
        400,
        'queue.scheduling.volcano.sh "agreement-missing" not found',
    ),
    Case(
        "volcano-refuses-deserved-above-capability",
        (volcano_queue("agreement-over", capability=gpus("4"), deserved=gpus("6")),),
        400,
        'requestBody.spec.deserved: Invalid value: "cpu 0.00, memory 0.00, nvidia.com/gpu '
        '6000.00": deserved should less equal than capability',
        sandbox_fragment=(
            'requestBody.spec.deserved.nvidia.com/gpu: Invalid value: "6": '
            "deserved[nvidia.com/gpu]=6 must be <= capability[nvidia.com/gpu]=4"
        ),
        sandbox_wording=NEWER_VOLCANO,
    ),
    # -- What the portal renders, whole
    Case("rendered-core-objects", tuple(render_cluster(CORE))),
    Case("rendered-kueue-objects", tuple(render_cluster(plan("kueue")))),
    Case("rendered-volcano-objects", tuple(render_cluster(plan("volcano")))),
]


# --------------------------------------------------------------------------------------------
# Running a row


def answer_of(client: KubeClient, obj: dict, *, dry_run: bool = False) -> tuple[Any, str]:
    """What a server answers to creating ``obj``: (ADMITTED, "") or (HTTP status, message)."""
    try:
        client.create(obj, dry_run=dry_run)
    except KubeError as exc:
        if exc.status is None:
            raise
        # The client words it "<method> <path>: <status> <reason>: <message>".
        return exc.status, str(exc).split(": ", 2)[2]
    return ADMITTED, ""


def _quota_enforced(client: KubeClient, obj: dict) -> None:
    """Admission enforces a quota only once the quota controller has filled status.hard."""
    meta = obj["metadata"]

    def filled() -> bool:
        found = client.get("v1", "ResourceQuota", meta["namespace"], meta["name"]) or {}
        return found.get("status", {}).get("hard") == obj["spec"]["hard"]

    poll(f"quota {meta['namespace']}/{meta['name']} status.hard", filled, DEADLINE, 0.3)


def run(client: KubeClient, case: Case, *, real: bool) -> tuple[Any, str]:
    *setup, target = case.objects
    for obj in setup:
        answer = answer_of(client, obj)
        assert answer == (ADMITTED, ""), (case.name, obj["kind"], obj["metadata"]["name"], answer)
        if real and obj["kind"] == "ResourceQuota":
            _quota_enforced(client, obj)
    if real and case.await_refusal_of is not None:
        probe = case.await_refusal_of
        poll(
            f"the admission policies to refuse {probe['metadata']['name']}",
            lambda: answer_of(client, probe, dry_run=True)[0] != ADMITTED,
            DEADLINE,
        )
    return answer_of(client, target)


def assert_answer(case: Case, answer: tuple[Any, str], fragment: str) -> None:
    status, message = answer
    if case.status is None:
        assert answer == (ADMITTED, ""), f"{case.name}: refused: {status}: {message}"
        return
    assert status == case.status, f"{case.name}: {status} (not {case.status}): {message}"
    assert fragment in message, f"{case.name}: {fragment!r} not in {message!r}"


def test_every_difference_states_its_reason() -> None:
    for case in CASES:
        assert bool(case.sandbox_fragment) == bool(case.sandbox_wording), case.name
        assert not (case.real_only and case.not_imitated), case.name
        assert not case.real_only or case.status is not None, case.name
        assert not case.not_imitated or case.status is None, case.name
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.fixture
def sandbox_client(kube_sandbox):
    client = KubeClient.for_url(kube_sandbox.url)
    yield client
    client.close()


@pytest.fixture
def real_client(real_cluster):
    client = KubeClient.from_kubeconfig(str(real_cluster.kubeconfig), "controlplane")
    yield client
    client.close()


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_the_sandbox_answers_as_the_table_says(case: Case, sandbox_client: KubeClient) -> None:
    answer = run(sandbox_client, case, real=False)
    if case.real_only:
        assert answer == (ADMITTED, ""), (
            f"{case.name}: the sandbox now refuses what it did not imitate ({case.real_only}); "
            f"drop real_only if it agrees with the real API server: {answer}"
        )
        return
    if case.not_imitated:
        status, message = answer
        assert status == 422 and NOT_IMITATED in message, (
            f"{case.name}: the sandbox was to refuse what it does not imitate "
            f"({case.not_imitated}): {answer}"
        )
        return
    assert_answer(case, answer, case.sandbox_fragment or case.fragment)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_the_real_api_server_answers_as_the_table_says(case: Case, real_client: KubeClient) -> None:
    assert_answer(case, run(real_client, case, real=True), case.fragment)


# --------------------------------------------------------------------------------------------
# What happens after an admitted policy: type warnings in its status (real only)

UNTYPED = pod_policy("agreement-type-warning", "object.spec.nothing == 'x'")


def test_the_real_api_server_reports_type_warnings_of_an_admitted_policy(real_client) -> None:
    """It checks ``object`` against the matched kinds' schemas after admitting the policy and
    reports what does not fit in status.typeChecking."""
    assert answer_of(real_client, UNTYPED) == (ADMITTED, "")
    api, kind = UNTYPED["apiVersion"], UNTYPED["kind"]

    def warnings() -> list[dict]:
        found = real_client.get(api, kind, "", UNTYPED["metadata"]["name"]) or {}
        return found.get("status", {}).get("typeChecking", {}).get("expressionWarnings", [])

    [warning] = poll("the policy's type checking", warnings, DEADLINE)
    assert warning["fieldRef"] == "spec.validations[0].expression"
    assert "undefined field 'nothing'" in warning["warning"], warning


def test_the_sandbox_reports_no_type_warnings(sandbox_client) -> None:
    """The sandbox writes no status on policies (it has no type-checking controller)."""
    assert answer_of(sandbox_client, UNTYPED) == (ADMITTED, "")
    stored = sandbox_client.get(
        UNTYPED["apiVersion"], UNTYPED["kind"], "", "agreement-type-warning"
    )
    assert "status" not in stored, stored
