"""Reads of quota data, scoped to what the asking user may see (shared by UI and API)."""

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import cached_property

from django.db import connection
from django.db.models import QuerySet, Sum

from common.sql import db_decimal, db_json, in_list, tables
from quotas.budgets import CeilingFacts, gpus_per_unit
from quotas.mig import CARD_MODELS, LayoutPlan, mig_profile_of, plan_layout
from quotas.models import (
    Allocation,
    Cluster,
    ClusterCapacity,
    PriorityClass,
    Resource,
    Team,
    TeamMembership,
    TeamNamespace,
)
from quotas.roles import AnyUser, is_platform_admin, sees_everything
from quotas.rules import (
    AllocationFacts,
    ClusterFacts,
    Finding,
    check_plan,
    sort_findings,
    top_priority_guaranteed,
)


def _children_below(team_ids: set[int]) -> dict[int, set[int]]:
    """Each team's children, for the teams below ``team_ids`` (one query per level)."""
    children: dict[int, set[int]] = defaultdict(set)
    found = set(team_ids)
    frontier = set(team_ids)
    while frontier:
        rows = list(
            Team.objects.filter(parent_id__in=frontier).order_by().values_list("parent_id", "id")
        )
        for parent_id, team_id in rows:
            children[parent_id].add(team_id)
        frontier = {team_id for _parent, team_id in rows} - found
        found |= frontier
    return children


def _closure(roots: set[int], children: dict[int, set[int]]) -> set[int]:
    """The roots and every team below them, from a map of each team's children."""
    found = set(roots)
    frontier = set(roots)
    while frontier:
        frontier = {child for team in frontier for child in children.get(team, ())} - found
        found |= frontier
    return found


def _with_descendants(team_ids: set[int]) -> set[int]:
    """A lead of a department also sees the department's teams."""
    return _closure(team_ids, _children_below(team_ids))


@dataclass(frozen=True)
class TeamScope:
    """The teams one user sees and may request quota for, read once for one request and passed
    down to its reads (never kept beyond it): the same answers as ``team_ids_of``,
    ``teams_visible_to`` and ``teams_requestable_by``, in one read of the user's memberships
    and one per level of departments below their teams (none for platform admins)."""

    # The user's own memberships, team id -> role (None: not read, for platform admins).
    roles: dict[int, str] | None
    # None: every team (admins and auditors see every team; admins request for every team).
    visible_ids: frozenset[int] | None
    requestable_ids: frozenset[int] | None

    def teams_visible(self) -> QuerySet[Team]:
        if self.visible_ids is None:
            return Team.objects.all()
        return Team.objects.filter(id__in=self.visible_ids)

    def teams_requestable(self) -> QuerySet[Team]:
        if self.requestable_ids is None:
            return Team.objects.all()
        return Team.objects.filter(id__in=self.requestable_ids)

    def may_request_any(self) -> bool:
        """Whether there is a team the user may request quota for."""
        if self.requestable_ids is None:
            return Team.objects.exists()
        return bool(self.requestable_ids)  # ids of memberships' teams and their children


def team_scope(user: AnyUser) -> TeamScope:
    """The user's TeamScope, read now."""
    if not user.is_authenticated or not user.is_active:
        return TeamScope(roles={}, visible_ids=frozenset(), requestable_ids=frozenset())
    if is_platform_admin(user):
        return TeamScope(roles=None, visible_ids=None, requestable_ids=None)
    roles: dict[int, str] = {}
    visible: set[int] = set()
    requestable: set[int] = set()
    for team_id, role, below in _memberships_below(user.pk):
        roles[team_id] = role
        visible.add(below)
        if role == TeamMembership.Role.LEAD:
            requestable.add(below)
    return TeamScope(
        roles=roles,
        visible_ids=None if sees_everything(user) else frozenset(visible),
        requestable_ids=frozenset(requestable),
    )


def _memberships_below(user_id: int) -> list[tuple[int, str, int]]:
    """(team id, the user's role there, a team at or below it) for each of the user's
    memberships and each team of the departments below it, in one statement (the same SQL on
    PostgreSQL and SQLite): the memberships and one query per level of departments cost a
    list page a round trip and two ORM queries' building."""
    membership, team = TeamMembership._meta.db_table, Team._meta.db_table
    sql = f"""
        WITH RECURSIVE below (root, id) AS (
            SELECT m.team_id, m.team_id FROM {membership} m WHERE m.user_id = %s
            UNION
            SELECT b.root, t.id FROM below b JOIN {team} t ON t.parent_id = b.id
        )
        SELECT b.root, m.role, b.id
        FROM below b JOIN {membership} m ON m.team_id = b.root AND m.user_id = %s
    """  # noqa: S608 - the models' table names and placeholders: no value is written in
    with connection.cursor() as cursor:
        cursor.execute(sql, [user_id, user_id])
        return cursor.fetchall()


def team_ids_of(user: AnyUser, *, roles: tuple[str, ...] | None = None) -> set[int]:
    """Teams the user belongs to (optionally only with the given roles), departments expanded."""
    if not user.is_authenticated or not user.is_active:
        return set()
    memberships = TeamMembership.objects.filter(user=user)
    if roles is not None:
        memberships = memberships.filter(role__in=roles)
    return _with_descendants(set(memberships.values_list("team_id", flat=True)))


def teams_visible_to(user: AnyUser) -> QuerySet[Team]:
    if not user.is_authenticated or not user.is_active:
        return Team.objects.none()
    if sees_everything(user):
        return Team.objects.all()
    return Team.objects.filter(id__in=team_ids_of(user))


def teams_led_by(user: AnyUser) -> QuerySet[Team]:
    return Team.objects.filter(id__in=team_ids_of(user, roles=(TeamMembership.Role.LEAD,)))


def teams_requestable_by(user: AnyUser) -> QuerySet[Team]:
    """Teams the user may request quota for (and turn suggestions into requests for): every
    team for platform admins, else the teams they lead (a department's lead: its teams too)."""
    return Team.objects.all() if is_platform_admin(user) else teams_led_by(user)


def namespaces_visible_to(user: AnyUser) -> QuerySet[TeamNamespace]:
    return TeamNamespace.objects.filter(team__in=teams_visible_to(user)).select_related(
        "team", "cluster"
    )


def allocations_visible_to(user: AnyUser) -> QuerySet[Allocation]:
    return Allocation.objects.filter(
        team_namespace__team__in=teams_visible_to(user)
    ).select_related("team_namespace__team", "team_namespace__cluster", "resource")


@dataclass
class CapacityLine:
    cluster: str
    resource: str
    unit: str
    capacity: Decimal
    guaranteed: Decimal = Decimal(0)
    capped: Decimal = Decimal(0)

    @property
    def free_guarantee(self) -> Decimal:
        return self.capacity - self.guaranteed

    @property
    def overcommit_ratio(self) -> Decimal | None:
        """Sum of caps over capacity: above 1 means teams can only all burst if others idle."""
        if not self.capacity:
            return None
        return (self.capped / self.capacity).quantize(Decimal("0.01"))

    @property
    def over_promised(self) -> bool:
        return self.guaranteed > self.capacity


def capacity_summary(*, cluster_ids: list[int] | None = None) -> list[CapacityLine]:
    """Per cluster and resource: capacity, sum of guarantees and sum of caps."""
    capacities = ClusterCapacity.objects.select_related("cluster", "resource")
    allocations = Allocation.objects.all()
    if cluster_ids is not None:
        capacities = capacities.filter(cluster_id__in=cluster_ids)
        allocations = allocations.filter(team_namespace__cluster_id__in=cluster_ids)
    sums: dict[tuple[int, int], dict[str, Decimal]] = defaultdict(dict)
    for row in allocations.values("team_namespace__cluster_id", "resource_id").annotate(
        guaranteed=Sum("guarantee"), capped=Sum("cap")
    ):
        sums[(row["team_namespace__cluster_id"], row["resource_id"])] = row
    lines = []
    for cap in capacities:
        row = sums.get((cap.cluster_id, cap.resource_id), {})
        lines.append(
            CapacityLine(
                cluster=cap.cluster.name,
                resource=cap.resource.name,
                unit=cap.resource.unit,
                capacity=cap.capacity,
                guaranteed=row.get("guaranteed") or Decimal(0),
                capped=row.get("capped") or Decimal(0),
            )
        )
    return lines


# What the plan check reads of a cluster, in the model's order of fields (Model.from_db takes
# them so); its other fields stay deferred, read if ever asked for.
PLAN_CLUSTER_FIELDS = (
    "id",
    "name",
    "gpu_cards",
    "volcano_enabled",
    "kueue_enabled",
    "yunikorn_enabled",
    "max_cap_share",
    "top_priority_share",
)
_RESOURCE_FIELDS = ("id", "name", "display_name", "kind", "unit", "quantity_suffix", "gpu_model")
_CAPACITY_FIELDS = ("id", "cluster_id", "resource_id", "capacity")


def plan_capacities(
    cluster_ids: Iterable[int],
) -> tuple[dict[int, Cluster], dict[int, list[ClusterCapacity]]]:
    """The clusters (by id) with what the plan rules read of them, and per cluster its
    capacities with their resources in the order of their names (a cluster with none recorded
    has an empty list), as cluster_facts takes them. One query, in SQL (the same on
    PostgreSQL and SQLite): the ORM took three times as long to build the query and its
    models as the database to answer it, on every waiting request's plan check."""
    ids = list(cluster_ids)
    if not ids:
        return {}, {}
    names = tables(cluster=Cluster, capacity=ClusterCapacity, resource=Resource)
    cluster_columns = ", ".join(f"c.{name}" for name in PLAN_CLUSTER_FIELDS)
    resource_columns = ", ".join(f"r.{name}" for name in _RESOURCE_FIELDS)
    sql = f"""
        SELECT {cluster_columns}, cc.id, cc.capacity, {resource_columns}
        FROM {names["cluster"]} c
        LEFT JOIN {names["capacity"]} cc ON cc.cluster_id = c.id
        LEFT JOIN {names["resource"]} r ON r.id = cc.resource_id
        WHERE c.id {in_list(ids)}
        ORDER BY c.name, r.name
    """  # noqa: S608 - the models' table and column names and placeholders: no value is
    with connection.cursor() as cursor:
        cursor.execute(sql, ids)
        rows = cursor.fetchall()
    db = connection.alias
    width = len(PLAN_CLUSTER_FIELDS)
    clusters: dict[int, Cluster] = {}
    capacities_of: dict[int, list[ClusterCapacity]] = {}
    for row in rows:
        pk, name, cards, volcano, kueue, yunikorn, max_share, top_share = row[:width]
        cluster = clusters.get(pk)
        if cluster is None:
            values = (
                pk,
                name,
                db_json(cards),
                bool(volcano),
                bool(kueue),
                bool(yunikorn),
                db_decimal(max_share),
                db_decimal(top_share),
            )
            cluster = clusters[pk] = Cluster.from_db(db, PLAN_CLUSTER_FIELDS, values)
            capacities_of[pk] = []
        capacity_id, capacity, *resource_values = row[width:]
        if capacity_id is None:
            continue
        resource = Resource.from_db(db, _RESOURCE_FIELDS, resource_values)
        found = ClusterCapacity.from_db(
            db, _CAPACITY_FIELDS, (capacity_id, pk, resource.pk, db_decimal(capacity))
        )
        found.cluster, found.resource = cluster, resource
        capacities_of[pk].append(found)
    return clusters, capacities_of


def top_priority_classes() -> frozenset[str]:
    """The priority classes of the highest value (one query; empty when none is defined)."""
    top = PriorityClass.objects.order_by("-value").values_list("value", flat=True).first()
    if top is None:
        return frozenset()
    return frozenset(PriorityClass.objects.filter(value=top).values_list("name", flat=True))


def cluster_facts(
    cluster: Cluster,
    capacities: list[ClusterCapacity] | None = None,
    *,
    top_classes: frozenset[str] | None = None,
) -> ClusterFacts:
    """What the plan rules need to know of a cluster (its capacities read unless given, with
    their resources; the highest priority classes read unless given, and only when the
    cluster limits their share)."""
    if capacities is None:
        capacities = list(cluster.capacities.select_related("resource"))
    top_share = cluster.effective_top_priority_share
    if top_share is not None and top_classes is None:
        top_classes = top_priority_classes()
    cards = {model: n for model, n in (cluster.gpu_cards or {}).items() if model in CARD_MODELS}
    return ClusterFacts(
        name=cluster.name,
        capacities={c.resource.name: c.capacity for c in capacities},
        max_cap_share=cluster.effective_max_cap_share,
        backends=frozenset(cluster.backends),
        whole_resources=frozenset(c.resource.name for c in capacities if c.resource.whole_units),
        gpu_cards=cards,
        mig_resources=mig_resources_of(cards, [c.resource for c in capacities]),
        top_priority_share=top_share,
        top_priority_classes=top_classes if top_share is not None else frozenset(),
    )


def mig_resources_of(cards: dict[str, int], resources) -> dict[str, tuple[str, str]]:
    """The MIG resources among ``resources`` whose card model the cluster has cards of:
    resource name -> (card model, profile)."""
    found = {}
    for resource in resources:
        profile = mig_profile_of(resource.name)
        if resource.kind == Resource.Kind.MIG and profile and resource.gpu_model in cards:
            found[resource.name] = (resource.gpu_model, profile)
    return found


def allocation_facts(allocation: Allocation) -> AllocationFacts:
    """An allocation as the plan rules see it (needs team_namespace__cluster and resource)."""
    ns = allocation.team_namespace
    return AllocationFacts(
        cluster=ns.cluster.name,
        namespace=ns.name,
        resource=allocation.resource.name,
        guarantee=allocation.guarantee,
        cap=allocation.cap,
        per_pod_max=allocation.per_pod_max,
        workload_class=ns.workload_class,
        unit=allocation.resource.unit,
        priority_classes=frozenset(allocation.priority_classes or ()),
    )


def allocation_facts_rows(cluster_ids: Iterable[int]) -> Iterator[tuple[int, int, AllocationFacts]]:
    """(cluster id, resource id, facts) of each allocation on these clusters, as
    allocation_facts gives them, in no particular order: rows, much cheaper than model
    instances with their namespace, cluster and resource. One query, in SQL (the same on
    PostgreSQL and SQLite): the cluster overview runs it, and the ORM took longer to build
    the query and its rows than the database to answer it."""
    clusters = list(cluster_ids)
    if not clusters:
        return
    allocation, namespace = Allocation._meta.db_table, TeamNamespace._meta.db_table
    cluster, resource = Cluster._meta.db_table, Resource._meta.db_table
    sql = f"""
        SELECT tn.cluster_id, a.resource_id, c.name, tn.name, r.name, a.guarantee, a.cap,
            a.per_pod_max, tn.workload_class, r.unit, a.priority_classes
        FROM {allocation} a
        JOIN {namespace} tn ON tn.id = a.team_namespace_id
        JOIN {cluster} c ON c.id = tn.cluster_id
        JOIN {resource} r ON r.id = a.resource_id
        WHERE tn.cluster_id {in_list(clusters)}
    """  # noqa: S608 - the models' table names and placeholders: no value is written in
    with connection.cursor() as cursor:
        cursor.execute(sql, clusters)
        rows = cursor.fetchall()
    for row in rows:
        cluster_id, resource_id, cluster_name, namespace_name, resource_name = row[:5]
        guarantee, cap, per_pod_max, workload_class, unit, classes = row[5:]
        yield (
            cluster_id,
            resource_id,
            AllocationFacts(
                cluster=cluster_name,
                namespace=namespace_name,
                resource=resource_name,
                guarantee=db_decimal(guarantee),
                cap=db_decimal(cap),
                per_pod_max=db_decimal(per_pod_max),
                workload_class=workload_class,
                unit=unit,
                priority_classes=frozenset(db_json(classes) or ()),
            ),
        )


def allocation_facts_of(
    cluster_ids: Iterable[int], resource_ids: Iterable[int], namespace_ids: Iterable[int]
) -> Iterator[tuple[int, int, AllocationFacts, bool]]:
    """(cluster id, resource id, facts, summed) of the allocations of these resources on
    these clusters, in one grouped query: those of ``namespace_ids`` one by one, as
    allocation_facts gives them (summed False); the others summed per cluster, resource and
    set of priority classes, with no namespace (summed True): what the plan rules count of
    allocations no change touches (check_change's ``others``). A few rows per resource
    however many namespaces the cluster has.

    Written in SQL (the same on PostgreSQL and SQLite): the plan check of every list page
    and the API's fits_plan run it, and the ORM took three times the query's own time to
    build and compile it."""
    clusters, resources, asked = list(cluster_ids), list(resource_ids), list(namespace_ids)
    if not clusters or not resources:
        return
    allocation, namespace = Allocation._meta.db_table, TeamNamespace._meta.db_table
    cluster, resource = Cluster._meta.db_table, Resource._meta.db_table
    # Grouped by ids and the priority classes (the names follow the ids): a narrow key the
    # database hashes quickly. A group of an asked namespace holds its one allocation, so
    # its maxima are that allocation's own values.
    asked_id = f"CASE WHEN a.team_namespace_id {in_list(asked)} THEN a.id END" if asked else "NULL"
    sql = f"""
        SELECT tn.cluster_id, a.resource_id, a.priority_classes, {asked_id},
            MAX(c.name), MAX(r.name), MAX(r.unit), MAX(tn.name), MAX(tn.workload_class),
            MAX(a.per_pod_max), SUM(a.guarantee), SUM(a.cap)
        FROM {allocation} a
        JOIN {namespace} tn ON tn.id = a.team_namespace_id
        JOIN {cluster} c ON c.id = tn.cluster_id
        JOIN {resource} r ON r.id = a.resource_id
        WHERE tn.cluster_id {in_list(clusters)} AND a.resource_id {in_list(resources)}
        GROUP BY 1, 2, 3, 4
    """  # noqa: S608 - the models' table names and placeholders: no value is written in
    with connection.cursor() as cursor:
        cursor.execute(sql, [*asked, *clusters, *resources])
        rows = cursor.fetchall()
    for row in rows:
        cluster_id, resource_id, classes, asked_pk, cluster_name, resource_name, unit = row[:7]
        namespace_name, workload_class, per_pod_max, guarantee, cap = row[7:]
        summed = asked_pk is None
        yield (
            cluster_id,
            resource_id,
            AllocationFacts(
                cluster=cluster_name,
                namespace="" if summed else namespace_name,
                resource=resource_name,
                guarantee=db_decimal(guarantee),
                cap=db_decimal(cap),
                per_pod_max=None if summed else db_decimal(per_pod_max),
                workload_class="" if summed else workload_class,
                unit=unit,
                priority_classes=frozenset(db_json(classes) or ()),
            ),
            summed,
        )


def plan_findings(*, cluster_ids: list[int] | None = None) -> list[Finding]:
    """Violations the current allocations already have (e.g. the seed's cap 10 above 8), for
    every cluster or only the given ones; errors first, then by cluster, namespace, resource.
    Three queries whatever the number of clusters."""
    clusters = Cluster.objects.order_by("name")
    capacities = ClusterCapacity.objects.select_related("resource")
    if cluster_ids is not None:
        clusters = clusters.filter(id__in=cluster_ids)
        capacities = capacities.filter(cluster_id__in=cluster_ids)
    return plan_findings_of(list(clusters), list(capacities))


def plan_findings_of(clusters: list[Cluster], capacities: list[ClusterCapacity]) -> list[Finding]:
    """plan_findings for clusters and their capacities (with their resources) already read:
    one query, the allocations read as rows, not models (a cluster may have hundreds)."""
    names = {cluster.pk: cluster.name for cluster in clusters}
    capacities_of: dict[int, list[ClusterCapacity]] = defaultdict(list)
    for capacity in capacities:
        capacities_of[capacity.cluster_id].append(capacity)
    # In no particular order: the findings are sorted, the sums do not depend on it.
    allocations_of: dict[int, list[AllocationFacts]] = defaultdict(list)
    for cluster_id, _resource_id, facts in allocation_facts_rows(names):
        allocations_of[cluster_id].append(facts)
    findings: list[Finding] = []
    top_classes = (
        top_priority_classes()
        if any(c.effective_top_priority_share is not None for c in clusters)
        else frozenset()
    )
    for cluster in clusters:
        findings += check_plan(
            cluster=cluster_facts(cluster, capacities_of[cluster.pk], top_classes=top_classes),
            allocations=allocations_of[cluster.pk],
        )
    return sort_findings(findings)


def mig_layouts(cluster: Cluster, guaranteed: dict[str, Decimal], resources) -> list[LayoutPlan]:
    """Per card model the cluster has, how the MIG instances guaranteed on it (``guaranteed``:
    resource name -> sum of guarantees) are cut from its cards (quotas.mig.plan_layout)."""
    cards = {model: n for model, n in (cluster.gpu_cards or {}).items() if model in CARD_MODELS}
    mig = mig_resources_of(cards, resources)
    plans = []
    for model, count in sorted(cards.items()):
        demand: dict[str, int] = {}
        for resource, (of_model, profile) in mig.items():
            if of_model == model:
                amount = guaranteed.get(resource) or Decimal(0)
                demand[profile] = demand.get(profile, 0) + int(amount.to_integral_value())
        plans.append(plan_layout(model, count, demand))
    return plans


@dataclass(frozen=True)
class TopPriorityUse:
    """What namespaces allowed the highest priority class are guaranteed of one resource of a
    cluster, against the cluster's limit (rule top_priority_share)."""

    cluster: str
    resource: str
    classes: tuple[str, ...]
    guaranteed: Decimal
    capacity: Decimal
    share: Decimal  # the limit, a share of the capacity

    @property
    def limit(self) -> Decimal:
        return self.share * self.capacity

    @property
    def over(self) -> bool:
        return self.guaranteed > self.limit

    @property
    def used_share(self) -> Decimal:
        return self.guaranteed / self.capacity if self.capacity else Decimal(0)


def top_priority_use(
    clusters: list[Cluster], capacities: list[ClusterCapacity]
) -> dict[str, list[TopPriorityUse]]:
    """Per cluster name, each resource's :class:`TopPriorityUse`, for the clusters that limit
    the highest class's share (two queries, none when no cluster does)."""
    limited = {c.pk: c for c in clusters if c.effective_top_priority_share is not None}
    if not limited:
        return {}
    top = top_priority_classes()
    if not top:
        return {}
    plans: dict[int, list[AllocationFacts]] = defaultdict(list)
    for cluster_id, _resource_id, facts in allocation_facts_rows(limited):
        plans[cluster_id].append(facts)
    found: dict[str, list[TopPriorityUse]] = defaultdict(list)
    for capacity in sorted(capacities, key=lambda c: c.resource.name):
        cluster = limited.get(capacity.cluster_id)
        if cluster is None or not capacity.capacity:
            continue
        facts = ClusterFacts(
            name=cluster.name,
            capacities={},
            max_cap_share=cluster.effective_max_cap_share,
            top_priority_share=cluster.effective_top_priority_share,
            top_priority_classes=top,
        )
        found[cluster.name].append(
            TopPriorityUse(
                cluster=cluster.name,
                resource=capacity.resource.name,
                classes=tuple(sorted(top)),
                guaranteed=top_priority_guaranteed(
                    facts, capacity.resource.name, plans[cluster.pk]
                ),
                capacity=capacity.capacity,
                share=cluster.effective_top_priority_share,
            )
        )
    return dict(found)


# --- budgets across clusters -------------------------------------------------------------------


@dataclass
class TeamGpus:
    """What a team's own namespaces hold over every cluster, in GPUs (quotas.budgets), and what
    that costs per hour on the clusters with a price."""

    guaranteed: Fraction = Fraction(0)
    capped: Fraction = Fraction(0)
    guaranteed_per_hour: Fraction = Fraction(0)
    capped_per_hour: Fraction = Fraction(0)
    # Capped GPUs on clusters without a price (not in the costs).
    unpriced: Fraction = Fraction(0)
    # Some of them are on a cluster with a price (then a cost is shown, even 0).
    priced: bool = False

    def add(self, other: "TeamGpus") -> None:
        self.priced = self.priced or other.priced
        self.guaranteed += other.guaranteed
        self.capped += other.capped
        self.guaranteed_per_hour += other.guaranteed_per_hour
        self.capped_per_hour += other.capped_per_hour
        self.unpriced += other.unpriced


def team_gpus(
    *, team_ids: Iterable[int] | None = None, namespace_ids: Iterable[int] | None = None
) -> dict[int, TeamGpus]:
    """Per team id, its GPUs guaranteed and capped over every cluster (or in those namespaces
    only), and their cost per hour; one query, whatever the number of teams and clusters."""
    rows = Allocation.objects.all()
    if team_ids is not None:
        rows = rows.filter(team_namespace__team_id__in=list(team_ids))
    if namespace_ids is not None:
        rows = rows.filter(team_namespace_id__in=list(namespace_ids))
    out: dict[int, TeamGpus] = defaultdict(TeamGpus)
    for team_id, kind, name, gpu_model, price, guarantee, cap in (
        rows.order_by()
        .values_list(
            "team_namespace__team_id",
            "resource__kind",
            "resource__name",
            "resource__gpu_model",
            "team_namespace__cluster__gpu_hour_price",
        )
        .annotate(g=Sum("guarantee"), c=Sum("cap"))
    ):
        per_unit = gpus_per_unit(kind=kind, name=name, gpu_model=gpu_model)
        if per_unit is None:
            continue
        gpus = out[team_id]
        guaranteed, capped = Fraction(guarantee) * per_unit, Fraction(cap) * per_unit
        gpus.guaranteed += guaranteed
        gpus.capped += capped
        if price is None:
            gpus.unpriced += capped
        else:
            gpus.priced = True
            gpus.guaranteed_per_hour += guaranteed * Fraction(price)
            gpus.capped_per_hour += capped * Fraction(price)
    return dict(out)


@dataclass
class TeamTree:
    """Every team's slug, parent and ceiling (one query): who is above and below whom."""

    slugs: dict[int, str]
    parents: dict[int, int | None]
    ceilings: dict[int, Decimal]

    @classmethod
    def read(cls) -> "TeamTree":
        """Every team, by a hand-written statement: each waiting request's plan check reads
        the tree, and the ORM took longer to build the query and its rows than to run it."""
        sql = f"SELECT id, parent_id, slug, gpu_ceiling FROM {Team._meta.db_table}"  # noqa: S608
        with connection.cursor() as cursor:
            cursor.execute(sql)
            rows = cursor.fetchall()
        return cls.of((pk, parent, slug, db_decimal(ceiling)) for pk, parent, slug, ceiling in rows)

    @classmethod
    def of(cls, teams: Iterable) -> "TeamTree":
        """From every team, as (id, parent id, slug, ceiling) or as Team rows."""
        slugs, parents, ceilings = {}, {}, {}
        for team in teams:
            if isinstance(team, Team):
                team = (team.pk, team.parent_id, team.slug, team.gpu_ceiling)
            pk, parent_id, slug, ceiling = team
            slugs[pk], parents[pk] = slug, parent_id
            if ceiling is not None:
                ceilings[pk] = ceiling
        return cls(slugs, parents, ceilings)

    def chain(self, team_id: int) -> list[int]:
        """The team and every team above it (a cycle ends the walk)."""
        chain: list[int] = []
        node: int | None = team_id
        while node is not None and node not in chain and node in self.parents:
            chain.append(node)
            node = self.parents[node]
        return chain

    def subtree(self, team_id: int) -> set[int]:
        """The team and every team below it."""
        return _closure({team_id}, self._children)

    @cached_property
    def _children(self) -> dict[int, set[int]]:
        children: dict[int, set[int]] = defaultdict(set)
        for pk, parent_id in self.parents.items():
            if parent_id is not None:
                children[parent_id].add(pk)
        return children


def ceiling_totals(
    tree: TeamTree,
    ceiling_teams: Iterable[int],
    *,
    held: Mapping[int, Fraction] | None = None,
    gpus: Mapping[int, TeamGpus] | None = None,
) -> dict[int, CeilingFacts]:
    """Per team with a ceiling, what its ceiling counts: the caps of its namespaces and of the
    teams under it over every cluster, plus ``held`` (per team id, the capped GPUs approved
    temporary grants will add). ``gpus`` may be read already (team_gpus)."""
    subtrees = {pk: tree.subtree(pk) for pk in ceiling_teams if pk in tree.ceilings}
    if not subtrees:
        return {}
    if gpus is None:
        gpus = team_gpus(team_ids=set().union(*subtrees.values()))
    held = held or {}
    return {
        pk: CeilingFacts(
            team=tree.slugs[pk],
            ceiling=tree.ceilings[pk],
            capped=sum(
                (
                    (gpus[t].capped if t in gpus else Fraction(0)) + held.get(t, Fraction(0))
                    for t in members
                ),
                Fraction(0),
            ),
            with_teams_under=len(members) > 1,
        )
        for pk, members in subtrees.items()
    }
