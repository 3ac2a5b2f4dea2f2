"""The desired state of one cluster, as plain data: what rendering works from.

`cluster_plan(cluster)` reads it from the database; everything downstream (rendering, diffing,
export) is pure and works on these frozen dataclasses.
"""

from collections.abc import Collection
from dataclasses import dataclass, replace
from decimal import Decimal

from django.conf import settings
from django.db.models import Count, Q


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
    # (priority class, seconds): the longest a pod, Job or Workload of the class may run.
    max_run_times: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class PriorityClassPlan:
    name: str
    value: int
    description: str = ""
    preempts: bool = True


@dataclass(frozen=True)
class DepartmentPlan:
    """What a department's parent queue is rendered from: sums over the namespaces below it
    that have allocations."""

    slug: str
    parent: str | None
    # (resource, sum of guarantees, sum of caps), by resource name.
    totals: tuple[tuple[ResourcePlan, Decimal, Decimal], ...]
    weight: int  # the members' queue weights summed, at most Volcano's largest weight


@dataclass(frozen=True)
class SharedTotals:
    """What the cluster-wide objects need from every namespace of the cluster, as totals: a
    plan of some namespaces only carries them (read with aggregate queries), a plan of all
    namespaces computes them from its namespaces (render.shared_totals)."""

    any_allocations: bool
    per_pod_max_resources: tuple[str, ...]  # resources with a per-pod max in some namespace
    vgpu_memory_resources: tuple[str, ...]  # HAMi vGPU memory resources allocated somewhere
    # Whether some namespace of the cluster has a maximum run time.
    any_max_run_time: bool = False
    # The departments above the plan's namespaces (every department in a plan of all).
    departments: tuple[DepartmentPlan, ...] = ()


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
    # None: `namespaces` are all of the cluster's. Else they are only some (those a change
    # touched, and the shadow ones) and these are the whole cluster's totals.
    shared: SharedTotals | None = None


def resource_plan(resource) -> ResourcePlan:
    """The rendering view of a Resource row."""
    return ResourcePlan(
        name=resource.name,
        kind=resource.kind,
        quantity_suffix=resource.quantity_suffix,
        gpu_model=resource.gpu_model,
    )


def cluster_plan(cluster, namespaces: Collection[str] | None = None) -> ClusterPlan:
    """Read a cluster's desired state from the database (generation first, then contents).

    With `namespaces`, a plan of only those team namespaces (and of the shadow ones, which a
    sync compares every time) that carries the whole cluster's totals for the cluster-wide
    objects (:class:`SharedTotals`, from aggregate queries): what a sync after a change of
    those namespaces' allocations renders.
    """
    from quotas.models import PriorityClass, TeamNamespace

    generation = getattr(cluster, "plan_generation", 0)
    rows = TeamNamespace.objects.filter(cluster=cluster)
    shared = None
    if namespaces is not None:
        departments = _departments_above(cluster, namespaces)
        # A namespace named like a department comes too: rendering refuses the clash, as it
        # does for the whole cluster, instead of writing one queue over the other.
        names = set(namespaces) | set(departments)
        rows = rows.filter(Q(name__in=names) | Q(shadow=True))
    namespace_plans = _namespace_plans(rows)
    if namespaces is not None:
        shared = _shared_totals(cluster, namespace_plans, "volcano" in cluster.backends)
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
        namespaces=namespace_plans,
        priority_classes=priority_classes,
        managed_by=settings.KUBE_MANAGED_BY,
        kueue_cohort=getattr(cluster, "kueue_cohort", "") or "portal",
        kueue_cpu_pool=getattr(cluster, "kueue_cpu_pool", None),
        kueue_memory_pool_gib=getattr(cluster, "kueue_memory_pool_gib", None),
        yunikorn_namespace=getattr(cluster, "yunikorn_namespace", "") or "yunikorn",
        generation=generation,
        shared=shared,
    )


def _namespace_plans(rows) -> tuple[NamespacePlan, ...]:
    """The plans of the TeamNamespace rows `rows`, by name, with their allocations."""
    from quotas.models import Allocation, RunTimeLimit

    namespaces = list(rows.select_related("team__parent__parent__parent").order_by("name"))
    run_times: dict[int, list[tuple[str, int]]] = {}
    for ns_id, name, seconds in (
        RunTimeLimit.objects.filter(team_namespace__in=[ns.id for ns in namespaces])
        .order_by("priority_class__name")
        .values_list("team_namespace_id", "priority_class__name", "max_seconds")
    ):
        run_times.setdefault(ns_id, []).append((name, seconds))
    by_namespace: dict[int, list[AllocationPlan]] = {}
    allocations = Allocation.objects.filter(
        team_namespace__in=[ns.id for ns in namespaces]
    ).select_related("resource")
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
    plans = []
    for ns in namespaces:
        team = ns.team
        plans.append(
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
                max_run_times=tuple(run_times.get(ns.id, ())),
            )
        )
    return tuple(plans)


def _departments_above(cluster, namespaces: Collection[str]) -> list[str]:
    """The slugs of the departments above the team namespaces `namespaces` of the cluster."""
    from quotas.models import TeamNamespace

    slugs: list[str] = []
    for ns in TeamNamespace.objects.filter(
        cluster=cluster, name__in=list(namespaces)
    ).select_related("team__parent__parent__parent"):
        slugs += [t.slug for t in ns.team.ancestors() if t.slug not in slugs]
    return slugs


def _shared_totals(cluster, namespaces: tuple[NamespacePlan, ...], volcano: bool) -> SharedTotals:
    """The whole cluster's totals the cluster-wide objects need, without reading every
    namespace: one aggregate over the allocations per resource, and the departments above
    `namespaces` from their members' allocations only."""
    from quotas.kube.render import HAMI_COUNT_RESOURCES
    from quotas.models import Allocation, RunTimeLimit

    per_resource = (
        Allocation.objects.filter(team_namespace__cluster=cluster)
        .values("resource__name", "resource__kind")
        .annotate(with_max=Count("id", filter=Q(per_pod_max__isnull=False)))
        .order_by("resource__name")
    )
    per_pod_max, vgpu_memory, any_allocations = [], [], False
    for row in per_resource:
        any_allocations = True
        name = row["resource__name"]
        if row["with_max"]:
            per_pod_max.append(name)
        if row["resource__kind"] == "vgpu_memory" and name in HAMI_COUNT_RESOURCES:
            vgpu_memory.append(name)
    return SharedTotals(
        any_allocations=any_allocations,
        per_pod_max_resources=tuple(per_pod_max),
        vgpu_memory_resources=tuple(vgpu_memory),
        any_max_run_time=RunTimeLimit.objects.filter(team_namespace__cluster=cluster).exists(),
        departments=_department_plans(cluster, namespaces) if volcano else (),
    )


def _department_plans(cluster, namespaces: tuple[NamespacePlan, ...]) -> tuple[DepartmentPlan, ...]:
    """The departments above `namespaces`, each with the totals of all its member namespaces
    (with allocations) on the cluster, read as plain rows of those members' allocations."""
    from quotas.kube.render import department_plan
    from quotas.models import Allocation, Resource, Team

    parents: dict[str, str | None] = {}
    for ns in namespaces:
        chain = ns.team.ancestors
        for i, slug in enumerate(chain):
            parents.setdefault(slug, chain[i + 1] if i + 1 < len(chain) else None)
    if not parents:
        return ()
    # Every team's chain of departments, as Team.ancestors walks it (stopping on a cycle).
    teams = {
        pk: (slug, parent)
        for pk, slug, parent in Team.objects.values_list("id", "slug", "parent_id")
    }

    def chain_of(team_id: int) -> list[str]:
        chain, seen, node = [], {team_id}, teams[team_id][1]
        while node is not None and node not in seen:
            chain.append(teams[node][0])
            seen.add(node)
            node = teams[node][1]
        return chain

    wanted = set(parents)
    member_teams = {pk: chain for pk in teams if wanted & set(chain := chain_of(pk))}
    rows = (
        Allocation.objects.filter(
            team_namespace__cluster=cluster, team_namespace__team_id__in=list(member_teams)
        )
        .order_by("team_namespace__name", "resource__name")
        .values_list(
            "team_namespace_id", "team_namespace__team_id", "resource_id", "guarantee", "cap"
        )
    )
    resources = {}
    members: dict[int, tuple[int, list[AllocationPlan]]] = {}
    rows = list(rows)
    for r in Resource.objects.filter(id__in={row[2] for row in rows}):
        resources[r.id] = resource_plan(r)
    for ns_id, team_id, resource_id, guarantee, cap in rows:
        _, allocations = members.setdefault(ns_id, (team_id, []))
        allocations.append(
            AllocationPlan(resource=resources[resource_id], guarantee=guarantee, cap=cap)
        )
    plans = []
    for slug in sorted(wanted):
        below = [
            tuple(allocations)
            for team_id, allocations in members.values()
            if slug in member_teams[team_id]
        ]
        plans.append(department_plan(slug, parents[slug], below))
    return tuple(p for p in plans if p.totals)


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
