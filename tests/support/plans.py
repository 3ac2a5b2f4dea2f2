"""Cluster plans built by hand for the renderers' tests (tests/quotas/kube)."""

from decimal import Decimal

from quotas.kube.objects import ObjectKey
from quotas.kube.plan import (
    AllocationPlan,
    ClusterPlan,
    NamespacePlan,
    PriorityClassPlan,
    ResourcePlan,
    TeamPlan,
)

D = Decimal


ALL_BACKENDS = frozenset({"core", "volcano", "kueue", "yunikorn"})


GPU = ResourcePlan("nvidia.com/gpu", "gpu", gpu_model="A100 80GB")


MIG_1G = ResourcePlan("nvidia.com/mig-1g.10gb", "mig", gpu_model="A100 80GB")


MIG_3G = ResourcePlan("nvidia.com/mig-3g.40gb", "mig", gpu_model="A100 80GB")


H100 = ResourcePlan("nvidia.com/gpu-h100", "gpu", gpu_model="H100 SXM")


GPUMEM = ResourcePlan("nvidia.com/gpumem", "vgpu_memory")


GPUCORES = ResourcePlan("nvidia.com/gpucores", "vgpu_cores")


CPU = ResourcePlan("cpu", "cpu")


MEMORY = ResourcePlan("memory", "memory", quantity_suffix="Gi")


PRIORITY_CLASSES = (
    PriorityClassPlan("production-inference", 100000, "Online inference.", True),
    PriorityClassPlan("training", 10000, "Training.", True),
    PriorityClassPlan("experiment", 1000, "Experiments.", False),
)


def team(slug: str, *ancestors: str) -> TeamPlan:
    return TeamPlan(slug=slug, name=slug.title(), ancestors=tuple(ancestors))


def ns(name, team_plan, workload_class, *allocations, shadow=False) -> NamespacePlan:
    return NamespacePlan(
        name=name,
        team=team_plan,
        workload_class=workload_class,
        allocations=tuple(allocations),
        shadow=shadow,
    )


def alloc(resource, guarantee, cap, per_pod=None, classes=()) -> AllocationPlan:
    return AllocationPlan(
        resource=resource,
        guarantee=D(guarantee),
        cap=D(cap),
        per_pod_max=None if per_pod is None else D(per_pod),
        priority_classes=tuple(classes),
    )


def seed_plan(backends=ALL_BACKENDS) -> ClusterPlan:
    """The seed's example: 16 A100, team A 6/10 (per pod 8), B 4/6 (per pod 2), C 2/4."""
    return ClusterPlan(
        name="demo",
        backends=frozenset(backends),
        capacities=((GPU, D(16)),),
        namespaces=(
            ns(
                "team-a-training",
                team("team-a"),
                "training",
                alloc(GPU, 6, 10, 8, ("experiment", "training")),
            ),
            ns(
                "team-b-inference",
                team("team-b"),
                "inference",
                alloc(GPU, 4, 6, 2, ("production-inference",)),
            ),
            ns("team-c-dev", team("team-c"), "dev", alloc(GPU, 2, 4, None, ("experiment",))),
        ),
        priority_classes=PRIORITY_CLASSES,
    )


def mig_plan(backends=ALL_BACKENDS) -> ClusterPlan:
    return ClusterPlan(
        name="demo-mig",
        backends=frozenset(backends),
        capacities=((MIG_1G, D(14)), (MIG_3G, D(4))),
        namespaces=(
            ns(
                "team-a-inference",
                team("team-a"),
                "inference",
                alloc(MIG_3G, 1, 2, 1, ("production-inference",)),
            ),
            ns("team-b-dev", team("team-b"), "dev", alloc(MIG_1G, 4, 6, 2, ("experiment",))),
            ns("team-c-dev", team("team-c"), "dev", alloc(MIG_1G, 2, 4, 1, ("experiment",))),
        ),
        priority_classes=PRIORITY_CLASSES,
    )


def hierarchy_plan(backends=ALL_BACKENDS) -> ClusterPlan:
    """research > ml > {team-a, team-b}; research > team-d; team-c at the top."""
    return ClusterPlan(
        name="deep",
        backends=frozenset(backends),
        namespaces=(
            ns("team-a-training", team("team-a", "ml", "research"), "training", alloc(GPU, 6, 10)),
            ns("team-b-inference", team("team-b", "ml", "research"), "inference", alloc(GPU, 4, 6)),
            ns("team-d-dev", team("team-d", "research"), "dev", alloc(GPU, 1, 2)),
            ns("team-c-dev", team("team-c"), "dev", alloc(GPU, 2, 4)),
        ),
    )


def find(objects, kind, name, namespace=""):
    matches = [o for o in objects if ObjectKey.of(o)[1:] == (kind, namespace, name)]
    assert len(matches) == 1, (kind, namespace, name, [ObjectKey.of(o) for o in objects])
    return matches[0]


def kinds(objects):
    return [o["kind"] for o in objects]
