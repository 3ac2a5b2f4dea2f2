"""One count of a pod's resources (quotas.kube.pods.pod_amounts): what usage reads of running
pods, and what the per-pod max policy (rendered as CEL) admits, agree on a table of pods with
sidecars, one-shot init containers and pod-level resources."""

from decimal import Decimal

import pytest

from quotas.kube.plan import ClusterPlan
from quotas.kube.pods import pod_amounts
from quotas.kube.render import per_pod_max_annotation, render_cluster
from tests.support.cel import admit
from tests.support.plans import ALL_BACKENDS, CPU, GPU, MEMORY, alloc, find, ns, team

G, CPU_NAME, MEM = "nvidia.com/gpu", "cpu", "memory"


def c(name="main", *, requests=None, limits=None, sidecar=False) -> dict:
    container = {"name": name, "image": "busybox", "resources": {}}
    if requests:
        container["resources"]["requests"] = requests
    if limits:
        container["resources"]["limits"] = limits
    if sidecar:
        container["restartPolicy"] = "Always"
    return container


def pod(*containers, init=(), resources=None) -> dict:
    spec = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    if resources:
        spec["resources"] = resources
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-x-dev"},
        "spec": spec,
    }


def gpus(n) -> dict:
    return {G: str(n)}


PODS = {
    "one app container": pod(c(limits=gpus(2))),
    "app containers add up": pod(c("a", limits=gpus(2)), c("b", limits=gpus(1))),
    "a larger init container": pod(c(limits=gpus(2)), init=[c("init", limits=gpus(4))]),
    "a sidecar next to the app": pod(
        c(limits=gpus(2)),
        init=[c("init", limits=gpus(2)), c("side", limits=gpus(1), sidecar=True)],
    ),
    "an init container next to a sidecar": pod(
        c(limits=gpus(2)),
        init=[c("side", limits=gpus(1), sidecar=True), c("init", limits=gpus(3))],
    ),
    "two sidecars": pod(
        c(limits=gpus(1)),
        init=[
            c("s1", limits=gpus(1), sidecar=True),
            c("init", limits=gpus(1)),
            c("s2", limits=gpus(1), sidecar=True),
        ],
    ),
    "cpu limits over requests, sidecar requests": pod(
        c(requests={CPU_NAME: "1"}, limits={CPU_NAME: "3"}),
        init=[
            c("side", requests={CPU_NAME: "500m"}, sidecar=True),
            c("init", requests={CPU_NAME: "2"}),
        ],
    ),
    "a pod-level request above the containers": pod(
        c(limits={CPU_NAME: "2"}), resources={"requests": {CPU_NAME: "6"}}
    ),
    "a pod-level request below the containers": pod(
        c(limits={CPU_NAME: "3"}),
        init=[c("side", limits={CPU_NAME: "1"}, sidecar=True)],
        resources={"requests": {CPU_NAME: "1"}},
    ),
    "a pod-level limit": pod(
        c("a", limits={CPU_NAME: "3"}),
        c("b", limits={CPU_NAME: "3"}),
        resources={"limits": {CPU_NAME: "4"}},
    ),
    "memory of a sidecar and a larger init": pod(
        c(limits={MEM: "1Gi"}),
        init=[c("side", requests={MEM: "128Mi"}, sidecar=True), c("init", limits={MEM: "2Gi"})],
    ),
    "everything at once": pod(
        c("a", limits={**gpus(2), CPU_NAME: "1500m", MEM: "2Gi"}),
        init=[
            c("side", limits={**gpus(1), CPU_NAME: "250m", MEM: "256Mi"}, sidecar=True),
            c("init", limits={**gpus(4), CPU_NAME: "2", MEM: "1Gi"}),
        ],
    ),
}


@pytest.fixture(scope="module")
def policy() -> dict:
    namespace = ns(
        "team-x-dev",
        team("team-x"),
        "dev",
        alloc(GPU, 1, 16, 8),
        alloc(CPU, 1, 16, 4),
        alloc(MEMORY, 1, 64, 8),
    )
    objects = render_cluster(ClusterPlan(name="c", backends=ALL_BACKENDS, namespaces=(namespace,)))
    return find(objects, "ValidatingAdmissionPolicy", "quota-portal-per-pod-max")


def _quantity(resource: str, amount: Decimal) -> str:
    if resource == CPU_NAME:
        return f"{int(amount * 1000)}m"
    return str(int(amount))


def _admitted(policy: dict, obj: dict, resource: str, maximum: Decimal) -> bool:
    key = per_pod_max_annotation(resource)
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team-x-dev", "annotations": {key: _quantity(resource, maximum)}},
    }
    return admit(policy, obj, namespace) == []


@pytest.mark.parametrize("name", list(PODS))
def test_the_policy_admits_a_pod_exactly_up_to_its_counted_amount(policy, name):
    obj = PODS[name]
    counted = pod_amounts(obj, limits=True)
    assert counted, name
    for resource, amount in counted.items():
        smallest = Decimal("0.001") if resource == CPU_NAME else Decimal(1)
        assert _admitted(policy, obj, resource, amount), (name, resource, amount)
        assert not _admitted(policy, obj, resource, amount - smallest), (name, resource, amount)


def test_the_counts_of_the_table():
    limits = {name: pod_amounts(obj, limits=True) for name, obj in PODS.items()}
    assert limits["a sidecar next to the app"] == {G: 3}
    assert limits["an init container next to a sidecar"] == {G: 4}
    assert limits["two sidecars"] == {G: 3}
    assert limits["cpu limits over requests, sidecar requests"] == {CPU_NAME: Decimal("3.5")}
    assert limits["a pod-level request below the containers"] == {CPU_NAME: 4}
    assert limits["a pod-level limit"] == {CPU_NAME: 4}
    assert limits["everything at once"] == {
        G: 5,
        CPU_NAME: Decimal("2.25"),
        MEM: (2 * 1024 + 256) * 1024 * 1024,
    }


def test_requests_count_what_the_quota_counts():
    """Usage counts requests (an extended resource stating only a limit requests it), with the
    sidecars next to the app and pod-level requests as the pod's."""
    obj = pod(
        c(requests={CPU_NAME: "1"}, limits={CPU_NAME: "3", **gpus(2)}),
        init=[c("side", requests={CPU_NAME: "500m", **gpus(1)}, sidecar=True)],
    )
    assert pod_amounts(obj) == {CPU_NAME: Decimal("1.5"), G: 3}
    obj["spec"]["resources"] = {"requests": {CPU_NAME: "4"}}
    assert pod_amounts(obj) == {CPU_NAME: 4, G: 3}
