"""The per-pod max admission policy: rendered objects, and its CEL run against sample pods.

The CEL is evaluated with cel-python, with Kubernetes' own CEL libraries as far as the policy
uses them (tests/support/cel.py).
"""

import pytest

from kubesandbox.schemas import validate_object
from quotas.kube.objects import ObjectKey
from quotas.kube.plan import ClusterPlan
from quotas.kube.render import (
    CLUSTER_LABEL,
    MANAGED_BY_LABEL,
    per_pod_max_annotation,
    render_cluster,
    render_namespace,
    render_per_pod_max_policy,
)
from tests.support.cel import admit
from tests.support.plans import (
    ALL_BACKENDS,
    CPU,
    GPU,
    GPUMEM,
    MEMORY,
    MIG_1G,
    alloc,
    find,
    hierarchy_plan,
    mig_plan,
    ns,
    seed_plan,
    team,
)

GPU_KEY = "quota-portal/per-pod-max.nvidia.com_gpu"

# --------------------------------------------------------------------------------------------
# Sample pods


def container(name="main", **limits) -> dict:
    c = {"name": name, "image": "busybox"}
    if limits:
        c["resources"] = {"limits": {k.replace("_", "/"): v for k, v in limits.items()}}
    return c


def gpu(n) -> dict:
    return {"nvidia.com/gpu": str(n)}


def pod(*containers, init=(), namespace="team-a-training") -> dict:
    spec = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": namespace},
        "spec": spec,
    }


def with_limits(c: dict, limits: dict, **extra) -> dict:
    return {**c, "resources": {"limits": limits}, **extra}


@pytest.fixture
def seed():
    plan = seed_plan()
    objects = render_cluster(plan)
    policy = find(objects, "ValidatingAdmissionPolicy", "quota-portal-per-pod-max")
    return objects, policy


# --------------------------------------------------------------------------------------------
# What is rendered


@pytest.mark.parametrize("make_plan", [seed_plan, mig_plan])
def test_nothing_renders_a_limit_range_any_more(make_plan):
    """Old portal LimitRanges gpu-limits are pruned on upgrade because none is rendered."""
    plan = make_plan()
    objects = render_cluster(plan)
    assert not [o for o in objects if o["kind"] == "LimitRange"]
    assert not [o for o in objects if o["metadata"]["name"] == "gpu-limits"]
    for namespace in plan.namespaces:
        assert "LimitRange" not in {o["kind"] for o in render_namespace(plan, namespace)}


def test_policy_and_binding_validate_strictly_and_carry_the_portal_labels(seed):
    objects, policy = seed
    binding = find(objects, "ValidatingAdmissionPolicyBinding", "quota-portal-per-pod-max")
    for obj in (policy, binding):
        assert validate_object(obj) == [], obj
        assert obj["apiVersion"] == "admissionregistration.k8s.io/v1"
        assert obj["metadata"]["labels"] == {
            MANAGED_BY_LABEL: "gpu-quota-portal",
            CLUSTER_LABEL: "demo",
        }
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert "paramKind" not in spec  # maxima come from the namespace, nothing can go missing
    assert spec["matchConstraints"]["namespaceSelector"] == {
        "matchLabels": {MANAGED_BY_LABEL: "gpu-quota-portal", CLUSTER_LABEL: "demo"}
    }
    rules = {
        (tuple(r["operations"]), tuple(r["resources"]), r["scope"])
        for r in spec["matchConstraints"]["resourceRules"]
    }
    assert rules == {
        (("CREATE",), ("pods",), "Namespaced"),
        (("UPDATE",), ("pods/resize",), "Namespaced"),
    }
    assert binding["spec"] == {
        "policyName": "quota-portal-per-pod-max",
        "validationActions": ["Deny"],
    }
    # Policy before binding, both before the namespaced objects.
    keys = [ObjectKey.of(o)[1] for o in objects]
    assert keys.index("ValidatingAdmissionPolicy") < keys.index("ValidatingAdmissionPolicyBinding")
    assert keys.index("ValidatingAdmissionPolicyBinding") < keys.index("ResourceQuota")


def test_namespaces_carry_their_maxima_as_annotations(seed):
    objects, _ = seed
    a = find(objects, "Namespace", "team-a-training")["metadata"]["annotations"]
    assert a[GPU_KEY] == "8"
    b = find(objects, "Namespace", "team-b-inference")["metadata"]["annotations"]
    assert b[GPU_KEY] == "2"
    c = find(objects, "Namespace", "team-c-dev")["metadata"].get("annotations", {})
    assert GPU_KEY not in c  # no per-pod max
    for obj in objects:
        if obj["kind"] == "Namespace":
            assert validate_object(obj) == []


def test_no_per_pod_max_anywhere_no_policy():
    plan = hierarchy_plan()
    assert render_per_pod_max_policy(plan) == []
    names = {o["metadata"]["name"] for o in render_cluster(plan)}
    assert "quota-portal-per-pod-max" not in names


def test_annotation_keys_are_valid_even_for_long_resource_names():
    assert per_pod_max_annotation("nvidia.com/gpu") == GPU_KEY
    long_name = "example.com/" + "x" * 60
    key = per_pod_max_annotation(long_name)
    prefix, name = key.split("/")
    assert prefix == "quota-portal" and len(name) <= 63
    assert key != per_pod_max_annotation("example.com/" + "x" * 61)
    probe = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "n", "annotations": {key: "1"}},
    }
    assert validate_object(probe) == []


# --------------------------------------------------------------------------------------------
# The CEL against sample pods (team-a-training: per-pod max 8 GPUs)


def namespace_of(objects, name="team-a-training") -> dict:
    return find(objects, "Namespace", name)


def test_pods_without_gpu_limits_are_admitted(seed):
    objects, policy = seed
    ns_a = namespace_of(objects)
    assert admit(policy, pod(container()), ns_a) == []  # no resources at all
    assert admit(policy, pod(container(cpu="2", memory="4Gi")), ns_a) == []
    sidecar = with_limits(container("proxy"), {"cpu": "100m"}, restartPolicy="Always")
    assert admit(policy, pod(container(cpu="1"), init=[sidecar]), ns_a) == []


def test_within_and_above_the_max(seed):
    objects, policy = seed
    ns_a = namespace_of(objects)
    assert admit(policy, pod(with_limits(container(), gpu(8))), ns_a) == []
    (denial,) = admit(policy, pod(with_limits(container(), gpu(9))), ns_a)
    assert denial.startswith("the pod states 9")
    assert "nvidia.com/gpu" in denial
    assert "per-pod max 8" in denial
    assert "team-a-training" in denial


def test_several_containers_are_summed(seed):
    objects, policy = seed
    ns_a = namespace_of(objects)
    four = with_limits(container("a"), gpu(4))
    assert admit(policy, pod(four, with_limits(container("b"), gpu(4))), ns_a) == []
    assert admit(policy, pod(four, with_limits(container("b"), gpu(5))), ns_a)
    # A container without a GPU limit next to GPU containers counts 0.
    assert (
        admit(
            policy, pod(four, container("log", cpu="1"), with_limits(container("b"), gpu(4))), ns_a
        )
        == []
    )


def test_init_containers_count_like_the_effective_pod_limit(seed):
    objects, policy = seed
    ns_a = namespace_of(objects)
    main = with_limits(container(), gpu(8))
    # An init container runs before the others: the larger of it and the sum counts.
    assert admit(policy, pod(main, init=[with_limits(container("init"), gpu(8))]), ns_a) == []
    (denial,) = admit(policy, pod(container(), init=[with_limits(container("init"), gpu(9))]), ns_a)
    assert denial.startswith("an init container of the pod states more nvidia.com/gpu")
    two_inits = [with_limits(container("i1"), gpu(6)), with_limits(container("i2"), gpu(7))]
    assert admit(policy, pod(with_limits(container(), gpu(2)), init=two_inits), ns_a) == []
    # A sidecar (restartPolicy Always) runs alongside the containers: it adds up.
    sidecar = with_limits(container("side"), gpu(1), restartPolicy="Always")
    assert admit(policy, pod(with_limits(container(), gpu(7)), init=[sidecar]), ns_a) == []
    assert admit(policy, pod(main, init=[sidecar]), ns_a)


def test_namespace_without_a_max_admits_anything(seed):
    objects, policy = seed
    ns_c = namespace_of(objects, "team-c-dev")
    assert admit(policy, pod(with_limits(container(), gpu(64)), namespace="team-c-dev"), ns_c) == []


def test_each_resource_has_its_own_max_and_fractions_compare_exactly():
    namespace = ns(
        "team-x-dev",
        team("team-x"),
        "dev",
        alloc(GPU, 1, 4, 2),
        alloc(MIG_1G, 1, 4, 3),
        alloc(CPU, 1, 4, "0.75"),
    )
    plan = ClusterPlan(name="c", backends=ALL_BACKENDS, namespaces=(namespace,))
    objects = render_cluster(plan)
    policy = find(objects, "ValidatingAdmissionPolicy", "quota-portal-per-pod-max")
    assert validate_object(policy) == []
    ns_x = namespace_of(objects, "team-x-dev")
    assert ns_x["metadata"]["annotations"]["quota-portal/per-pod-max.cpu"] == "750m"
    ok = pod(
        with_limits(
            container("a"), {"nvidia.com/gpu": "2", "nvidia.com/mig-1g.10gb": "3", "cpu": "500m"}
        ),
        with_limits(container("b"), {"cpu": "0.25"}),
        namespace="team-x-dev",
    )
    assert admit(policy, ok, ns_x) == []
    too_much = pod(
        with_limits(
            container("a"), {"nvidia.com/gpu": "2", "nvidia.com/mig-1g.10gb": "4", "cpu": "751m"}
        ),
        namespace="team-x-dev",
    )
    denials = admit(policy, too_much, ns_x)
    assert len(denials) == 2
    assert any("nvidia.com/mig-1g.10gb" in d for d in denials)
    assert any(" cpu " in d for d in denials)


# --------------------------------------------------------------------------------------------
# Requests and pod-level resources count too


def cpu_memory_plan():
    namespace = ns(
        "team-x-dev",
        team("team-x"),
        "dev",
        alloc(CPU, 1, 16, 4),
        alloc(MEMORY, 1, 64, 8),
    )
    plan = ClusterPlan(name="c", backends=ALL_BACKENDS, namespaces=(namespace,))
    objects = render_cluster(plan)
    policy = find(objects, "ValidatingAdmissionPolicy", "quota-portal-per-pod-max")
    return policy, namespace_of(objects, "team-x-dev")


def x_pod(*containers, init=(), resources=None) -> dict:
    obj = pod(*containers, init=init, namespace="team-x-dev")
    if resources:
        obj["spec"]["resources"] = resources
    return obj


def with_requests(c: dict, requests: dict, **extra) -> dict:
    return {**c, "resources": {"requests": requests}, **extra}


def test_a_container_stating_only_requests_is_held_to_the_max():
    policy, ns_x = cpu_memory_plan()
    assert admit(policy, x_pod(with_requests(container(), {"cpu": "4"})), ns_x) == []
    (denial,) = admit(policy, x_pod(with_requests(container(), {"cpu": "5"})), ns_x)
    assert denial.startswith("the pod states 5") and " cpu " in denial
    (denial,) = admit(policy, x_pod(with_requests(container(), {"memory": "9Gi"})), ns_x)
    assert "memory" in denial and "per-pod max 8Gi" in denial
    # Requests of one container and limits of another add up; the limit wins where both are.
    both = {"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "3"}}}
    assert admit(policy, x_pod({**container("a"), **both}), ns_x) == []
    two = x_pod({**container("a"), **both}, with_requests(container("b"), {"cpu": "2"}))
    assert admit(policy, two, ns_x)
    # Init containers and sidecars stating requests only count as with limits.
    init = with_requests(container("init"), {"cpu": "5"})
    assert admit(policy, x_pod(container(), init=[init]), ns_x)
    sidecar = with_requests(container("side"), {"cpu": "1"}, restartPolicy="Always")
    assert admit(policy, x_pod(with_requests(container(), {"cpu": "4"}), init=[sidecar]), ns_x)


def test_pod_level_resources_are_the_pod_s_amount():
    policy, ns_x = cpu_memory_plan()
    for field in ("requests", "limits"):
        (denial,) = admit(policy, x_pod(container(), resources={field: {"cpu": "6"}}), ns_x)
        assert denial.startswith("the pod states 6") and " cpu " in denial, field
        assert admit(policy, x_pod(container(), resources={field: {"cpu": "4"}}), ns_x) == []
    # A pod-level limit caps the whole pod, whatever its containers' limits add up to.
    three = with_limits(container("a"), {"cpu": "3"})
    capped = x_pod(three, {**three, "name": "b"}, resources={"limits": {"cpu": "4"}})
    assert admit(policy, capped, ns_x) == []
    # A pod-level request alone leaves the containers' limits counting.
    uncapped = x_pod(three, {**three, "name": "b"}, resources={"requests": {"cpu": "2"}})
    assert admit(policy, uncapped, ns_x)
    # Pod-level cpu says nothing about memory.
    big_memory = x_pod(
        with_limits(container(), {"memory": "9Gi"}), resources={"limits": {"cpu": "1"}}
    )
    (denial,) = admit(policy, big_memory, ns_x)
    assert "memory" in denial


# --------------------------------------------------------------------------------------------
# HAMi: containers must state their vGPU memory


def hami_plan():
    namespace = ns("team-h-dev", team("team-h"), "dev", alloc(GPUMEM, 10240, 40960))
    other = ns("team-a-training", team("team-a"), "training", alloc(GPU, 1, 4))
    plan = ClusterPlan(name="c", backends=ALL_BACKENDS, namespaces=(namespace, other))
    objects = render_cluster(plan)
    policy = find(objects, "ValidatingAdmissionPolicy", "quota-portal-per-pod-max")
    return policy, objects


def test_hami_namespaces_are_marked_and_the_policy_renders_without_any_per_pod_max():
    policy, objects = hami_plan()
    assert validate_object(policy) == []
    marked = find(objects, "Namespace", "team-h-dev")["metadata"]["annotations"]
    assert marked == {
        "quota-portal/vgpu-memory-required.nvidia.com_gpumem": "true",
        "scheduling.volcano.sh/queue-name": "team-h-dev",
    }
    other = find(objects, "Namespace", "team-a-training")["metadata"]["annotations"]
    assert "quota-portal/vgpu-memory-required.nvidia.com_gpumem" not in other


def test_hami_container_stating_gpu_without_gpumem_is_refused():
    policy, objects = hami_plan()
    ns_h = namespace_of(objects, "team-h-dev")

    def h_pod(*containers, init=()):
        return pod(*containers, init=init, namespace="team-h-dev")

    sliced = with_limits(container("main"), {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8192"})
    assert admit(policy, h_pod(sliced), ns_h) == []
    assert admit(policy, h_pod(container("cpu", cpu="1")), ns_h) == []
    (denial,) = admit(policy, h_pod(sliced, with_limits(container("whole"), gpu(1))), ns_h)
    assert denial.startswith(
        "container whole states nvidia.com/gpu without nvidia.com/gpumem: in namespace team-h-dev"
    )
    init = with_requests(container("setup"), gpu(1))
    assert admit(policy, h_pod(sliced, init=[init]), ns_h)
    # Namespaces without a vGPU memory allocation keep whole-GPU pods.
    ns_a = namespace_of(objects, "team-a-training")
    assert admit(policy, pod(with_limits(container(), gpu(1))), ns_a) == []
