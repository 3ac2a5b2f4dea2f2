"""The desired state of one cluster, as plain data: what rendering works from.

`cluster_plan(cluster)` reads it from the database; everything downstream (rendering, diffing,
export) is pure and works on these frozen dataclasses.
"""

from dataclasses import dataclass, replace
from decimal import Decimal

from django.conf import settings


@dataclass(frozen=True)
class ResourcePlan:
    name: str  # e.g. "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/gpumem", "cpu"
    kind: str  # Resource.Kind value: gpu, mig, vgpu_memory, vgpu_cores, cpu, memory
    quantity_suffix: str = ""  # appended to amounts in quantities, e.g. "Gi" for memory
    gpu_model: str = ""


@dataclass(frozen=True)
class AllocationPlan:
    resource: ResourcePlan
    guarantee: Decimal
    cap: Decimal
    per_pod_max: Decimal | None = None
    priority_classes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TeamPlan:
    slug: str
    name: str
    # Departments above the team, nearest first (a Volcano parent queue / Kueue cohort each).
    ancestors: tuple[str, ...] = ()


@dataclass(frozen=True)
class NamespacePlan:
    name: str
    team: TeamPlan
    workload_class: str  # inference, training, dev
    allocations: tuple[AllocationPlan, ...] = ()
    # Shadow: computed and reported, never written (staged rollout per namespace).
    shadow: bool = False


@dataclass(frozen=True)
class PriorityClassPlan:
    name: str
    value: int
    description: str = ""
    preempts: bool = True


@dataclass(frozen=True)
class ClusterPlan:
    name: str
    backends: frozenset[str]  # "core" always; "volcano", "kueue", "yunikorn"
    capacities: tuple[tuple[ResourcePlan, Decimal], ...] = ()
    namespaces: tuple[NamespacePlan, ...] = ()
    priority_classes: tuple[PriorityClassPlan, ...] = ()
    managed_by: str = "gpu-quota-portal"
    kueue_cohort: str = "portal"
    # What Kueue may admit in cpu (cores) and memory (GiB) in the whole cluster; None: the
    # recorded capacity of that resource, else unbounded.
    kueue_cpu_pool: Decimal | None = None
    kueue_memory_pool_gib: Decimal | None = None
    yunikorn_namespace: str = "yunikorn"
    # Whether the API server serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicy
    # (Kubernetes 1.36+): learnt by the sync from discovery, never stored.
    mutating_policies_served: bool = False
    # Monotonic counter of the cluster's desired state; written on objects to fence old syncs.
    generation: int = 0


def resource_plan(resource) -> ResourcePlan:
    """The rendering view of a Resource row."""
    return ResourcePlan(
        name=resource.name,
        kind=resource.kind,
        quantity_suffix=resource.quantity_suffix,
        gpu_model=resource.gpu_model,
    )


def cluster_plan(cluster) -> ClusterPlan:
    """Read a cluster's desired state from the database (generation first, then contents)."""
    from quotas.models import Allocation, PriorityClass, TeamNamespace

    generation = getattr(cluster, "plan_generation", 0)
    by_namespace: dict[int, list[AllocationPlan]] = {}
    allocations = Allocation.objects.filter(team_namespace__cluster=cluster).select_related(
        "resource"
    )
    for a in allocations.order_by("resource__name"):
        by_namespace.setdefault(a.team_namespace_id, []).append(
            AllocationPlan(
                resource=resource_plan(a.resource),
                guarantee=a.guarantee,
                cap=a.cap,
                per_pod_max=a.per_pod_max,
                priority_classes=tuple(sorted(a.priority_classes or ())),
            )
        )
    namespaces = []
    for ns in (
        TeamNamespace.objects.filter(cluster=cluster)
        .select_related("team__parent__parent__parent")
        .order_by("name")
    ):
        team = ns.team
        namespaces.append(
            NamespacePlan(
                name=ns.name,
                team=TeamPlan(
                    slug=team.slug,
                    name=team.name,
                    ancestors=tuple(t.slug for t in team.ancestors()),
                ),
                workload_class=ns.workload_class,
                allocations=tuple(by_namespace.get(ns.id, ())),
                shadow=getattr(ns, "shadow", False),
            )
        )
    capacities = tuple(
        (resource_plan(c.resource), c.capacity)
        for c in cluster.capacities.select_related("resource").order_by("resource__name")
    )
    priority_classes = tuple(
        PriorityClassPlan(
            name=p.name, value=p.value, description=p.description, preempts=p.preempts
        )
        for p in PriorityClass.objects.order_by("name")
    )
    return ClusterPlan(
        name=cluster.name,
        backends=frozenset(cluster.backends),
        capacities=capacities,
        namespaces=tuple(namespaces),
        priority_classes=priority_classes,
        managed_by=settings.KUBE_MANAGED_BY,
        kueue_cohort=getattr(cluster, "kueue_cohort", "") or "portal",
        kueue_cpu_pool=getattr(cluster, "kueue_cpu_pool", None),
        kueue_memory_pool_gib=getattr(cluster, "kueue_memory_pool_gib", None),
        yunikorn_namespace=getattr(cluster, "yunikorn_namespace", "") or "yunikorn",
        generation=generation,
    )


@dataclass(frozen=True)
class AllocationChange:
    """A proposed value for one allocation, to preview before it is approved."""

    namespace: str
    resource: ResourcePlan
    guarantee: Decimal
    cap: Decimal
    per_pod_max: Decimal | None = None
    priority_classes: tuple[str, ...] = ()


def plan_with_changes(plan: ClusterPlan, changes: list[AllocationChange]) -> ClusterPlan:
    """The plan as it would be with `changes` applied (new allocations included)."""
    by_namespace: dict[str, list[AllocationChange]] = {}
    for change in changes:
        by_namespace.setdefault(change.namespace, []).append(change)
    namespaces = []
    for ns in plan.namespaces:
        wanted = {c.resource.name: c for c in by_namespace.get(ns.name, [])}
        allocations = []
        for allocation in ns.allocations:
            change = wanted.pop(allocation.resource.name, None)
            allocations.append(_as_allocation(change) if change else allocation)
        allocations += [_as_allocation(c) for c in wanted.values()]
        allocations.sort(key=lambda a: a.resource.name)
        namespaces.append(replace(ns, allocations=tuple(allocations)))
    return replace(plan, namespaces=tuple(namespaces))


def _as_allocation(change: AllocationChange) -> AllocationPlan:
    return AllocationPlan(
        resource=change.resource,
        guarantee=change.guarantee,
        cap=change.cap,
        per_pod_max=change.per_pod_max,
        priority_classes=tuple(sorted(change.priority_classes)),
    )
