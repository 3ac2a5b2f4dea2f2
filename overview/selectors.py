"""Reads behind the overview pages: a team's allocations with their newest usage and its usage
history, each cluster's capacity against its promises per team, and the cross-cluster summary.

Scoped to who asks: admins and auditors see every team by name; a lead or member sees their own
teams by name and every other team only inside one aggregated "other teams" figure. Each read
is a fixed number of queries, however many teams, clusters, namespaces or days there are.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal

from django.db import connection
from django.db.models import Sum
from django.utils import timezone

from common.amounts import format_amount
from common.sql import db_date, db_decimal, db_json, db_moment, in_list, tables
from quotas.models import (
    Allocation,
    AllocationVersion,
    Cluster,
    ClusterCapacity,
    Resource,
    Team,
    TeamNamespace,
)
from quotas.roles import AnyUser, sees_everything
from quotas.rules import Finding
from quotas.selectors import team_ids_of
from usage.charts import AllocationStep, in_force
from usage.models import UsageDaily, UsageSample

ZERO = Decimal(0)


def amount_cell(value: Decimal | None) -> str:
    """An amount as a table cell of the overview pages writes it, an en dash for none (as
    ``|amount|default:"\u2013"`` would): computed in Python, not by two filters per cell."""
    return "\u2013" if value is None else format_amount(value)


def visible_team_ids(user: AnyUser) -> set[int] | None:
    """None for who sees every team (admins, auditors), else the user's teams' ids."""
    if sees_everything(user):
        return None
    return team_ids_of(user)


# --- the team dashboard ---------------------------------------------------------------------


@dataclass(frozen=True)
class AllocationNow:
    """An allocation (a row of its guarantee, cap, per_pod_max and priority_classes, its
    team_namespace's team_id, cluster__name, name and workload_class, and its resource's name
    and display_name) with the newest reading of its usage: a raw sample (``used_at``), or,
    where only daily rollups are kept, the peak of the newest day (``used_day``)."""

    allocation: dict
    used: Decimal | None
    used_at: datetime | None
    used_day: date | None

    @property
    def borrowed(self) -> Decimal | None:
        """What is used above the guarantee, i.e. borrowed from other teams' idle share."""
        if self.used is None:
            return None
        return max(self.used - self.allocation["guarantee"], ZERO)


def allocations_now(*, team_ids: Iterable[int]) -> list[AllocationNow]:
    """The teams' allocations (by team, cluster, namespace, resource), each with its newest
    usage reading: one query, the readings found through the samples' and rollups' unique
    indexes, backwards, so a year of 5-minute samples is never sorted.

    Written in SQL (the same on PostgreSQL and SQLite): the ORM took longer to build its four
    correlated subqueries than the database to answer them."""
    ids = list(team_ids)
    if not ids:
        return []
    names = tables(
        allocation=Allocation,
        namespace=TeamNamespace,
        cluster=Cluster,
        resource=Resource,
        sample=UsageSample,
        daily=UsageDaily,
    )
    same = "team_namespace_id = a.team_namespace_id AND {0}.resource_id = a.resource_id"
    sample = f"FROM {names['sample']} s WHERE s.{same.format('s')}"
    sample += ' ORDER BY s."timestamp" DESC, s.source DESC LIMIT 1'
    day = f"FROM {names['daily']} d WHERE d.{same.format('d')} ORDER BY d.day DESC LIMIT 1"
    sql = f"""
        SELECT a.guarantee, a.cap, a.per_pod_max, a.priority_classes,
            (SELECT s.allocated {sample}), (SELECT s."timestamp" {sample}),
            (SELECT d.peak {day}), (SELECT d.day {day}),
            tn.team_id, c.name, tn.name, tn.workload_class, r.name, r.display_name
        FROM {names["allocation"]} a
        JOIN {names["namespace"]} tn ON tn.id = a.team_namespace_id
        JOIN {names["cluster"]} c ON c.id = tn.cluster_id
        JOIN {names["resource"]} r ON r.id = a.resource_id
        WHERE tn.team_id {in_list(ids)}
        ORDER BY tn.team_id, c.name, tn.name, r.name
    """  # noqa: S608 - the models' table names and placeholders: no value is written in
    with connection.cursor() as cursor:
        cursor.execute(sql, ids)
        found = cursor.fetchall()
    out = []
    for row in found:
        guarantee, cap, per_pod_max, classes, used, used_at, peak, peak_day, *where = row
        a = dict(zip(_NOW_KEYS, where, strict=True))
        a.update(
            guarantee=db_decimal(guarantee),
            cap=db_decimal(cap),
            per_pod_max=db_decimal(per_pod_max),
            priority_classes=db_json(classes),
        )
        if used_at is not None:
            out.append(AllocationNow(a, db_decimal(used), db_moment(used_at), None))
        elif peak_day is not None:
            out.append(AllocationNow(a, db_decimal(peak), None, db_date(peak_day)))
        else:
            out.append(AllocationNow(a, None, None, None))
    return out


# The keys of an AllocationNow's allocation besides its amounts and priority classes.
_NOW_KEYS = (
    "team_namespace__team_id",
    "team_namespace__cluster__name",
    "team_namespace__name",
    "team_namespace__workload_class",
    "resource__name",
    "resource__display_name",
)


@dataclass
class UsageSeries:
    """One team's daily usage of one resource on one cluster (its namespaces summed), with the
    sum of the guarantees and of the caps in force each day."""

    team_id: int
    cluster: str
    resource: str
    unit: str
    days: list[date] = field(default_factory=list)
    peak: list[Decimal] = field(default_factory=list)
    mean: list[Decimal] = field(default_factory=list)
    guarantee: list[Decimal | None] = field(default_factory=list)
    cap: list[Decimal | None] = field(default_factory=list)


def _allocation_steps(team_ids: list[int]) -> dict[tuple, list[list[AllocationStep]]]:
    """Per (team, cluster, resource): the version history of each allocation there."""
    names = tables(
        version=AllocationVersion,
        allocation=Allocation,
        namespace=TeamNamespace,
        cluster=Cluster,
        resource=Resource,
    )
    sql = f"""
        SELECT v.allocation_id, tn.team_id, c.name, r.name, v.changed_at, v.guarantee, v.cap
        FROM {names["version"]} v
        JOIN {names["allocation"]} a ON a.id = v.allocation_id
        JOIN {names["namespace"]} tn ON tn.id = a.team_namespace_id
        JOIN {names["cluster"]} c ON c.id = tn.cluster_id
        JOIN {names["resource"]} r ON r.id = a.resource_id
        WHERE tn.team_id {in_list(team_ids)}
        ORDER BY v.allocation_id, v.changed_at, v.version
    """  # noqa: S608 - the models' table names and placeholders: no value is written in
    with connection.cursor() as cursor:
        cursor.execute(sql, team_ids)
        versions = cursor.fetchall()
    per_allocation: dict[int, list[AllocationStep]] = defaultdict(list)
    where: dict[int, tuple] = {}
    for alloc_id, team_id, cluster, resource, changed, guarantee, cap in versions:
        since = timezone.localtime(db_moment(changed)).date()
        per_allocation[alloc_id].append(
            AllocationStep(since, db_decimal(guarantee), db_decimal(cap))
        )
        where[alloc_id] = (team_id, cluster, resource)
    steps: dict[tuple, list[list[AllocationStep]]] = defaultdict(list)
    for alloc_id, history in per_allocation.items():
        steps[where[alloc_id]].append(history)
    return steps


def _sum_in_force(histories: list[list[AllocationStep]], day: date, attr: str) -> Decimal | None:
    values = [getattr(s, attr) for s in (in_force(h, day) for h in histories) if s is not None]
    return sum(values, ZERO) if values else None


def team_usage_series(*, team_ids: Iterable[int], start: date, end: date) -> list[UsageSeries]:
    """Per team, cluster and resource with usage rolled up in [start, end]: the daily sums of
    the namespaces' peaks and means, and the guarantee and cap in force each day (steps over
    the allocations' versions). Two queries, in SQL (the same on PostgreSQL and SQLite): the
    ORM took longer to build them than to run them."""
    ids = list(team_ids)
    if not ids:
        return []
    names = tables(daily=UsageDaily, namespace=TeamNamespace, cluster=Cluster, resource=Resource)
    sql = f"""
        SELECT tn.team_id, c.name, r.name, r.unit, d.day, SUM(d.peak), SUM(d.mean)
        FROM {names["daily"]} d
        JOIN {names["namespace"]} tn ON tn.id = d.team_namespace_id
        JOIN {names["cluster"]} c ON c.id = tn.cluster_id
        JOIN {names["resource"]} r ON r.id = d.resource_id
        WHERE tn.team_id {in_list(ids)} AND d.day >= %s AND d.day <= %s
        GROUP BY tn.team_id, c.name, r.name, r.unit, d.day
        ORDER BY tn.team_id, c.name, r.name, d.day
    """  # noqa: S608 - the models' table names and placeholders: no value is written in
    days = [connection.ops.adapt_datefield_value(day) for day in (start, end)]
    with connection.cursor() as cursor:
        cursor.execute(sql, [*ids, *days])
        rows = cursor.fetchall()
    steps = _allocation_steps(ids)
    series: dict[tuple, UsageSeries] = {}
    for team_id, cluster, resource, unit, day, peak, mean in rows:
        key = (team_id, cluster, resource)
        s = series.get(key)
        if s is None:
            s = series[key] = UsageSeries(*key, unit=unit)
        day = db_date(day)
        s.days.append(day)
        s.peak.append(db_decimal(peak))
        s.mean.append(db_decimal(mean))
        s.guarantee.append(_sum_in_force(steps.get(key, []), day, "guarantee"))
        s.cap.append(_sum_in_force(steps.get(key, []), day, "cap"))
    return list(series.values())


# --- capacity against promises, per cluster and team ----------------------------------------


@dataclass(frozen=True)
class Share:
    """What one team (or every team the user may not see, together) holds of a resource."""

    label: str
    team_slug: str | None  # None: the aggregate of other teams
    guarantee: Decimal
    cap: Decimal

    @property
    def is_others(self) -> bool:
        return self.team_slug is None


@dataclass
class ResourceLine:
    """One resource of one cluster: capacity, the sums of guarantees and caps, per team."""

    cluster: str
    resource: str
    display_name: str
    unit: str
    capacity: Decimal | None
    guaranteed: Decimal = ZERO
    capped: Decimal = ZERO
    shares: list[Share] = field(default_factory=list)

    @property
    def over_promised(self) -> bool:
        """Guarantees are promises: their sum must never exceed the capacity."""
        return self.guaranteed > (self.capacity or ZERO)

    @property
    def free_guarantee(self) -> Decimal | None:
        return None if self.capacity is None else self.capacity - self.guaranteed

    @property
    def cap_ratio(self) -> Decimal | None:
        """Sum of caps over capacity: above 1, teams can only all burst while others idle."""
        if not self.capacity:
            return None
        return (self.capped / self.capacity).quantize(Decimal("0.01"))


@dataclass
class ClusterLines:
    cluster: Cluster
    lines: list[ResourceLine] = field(default_factory=list)

    @property
    def over_promised(self) -> bool:
        return any(line.over_promised for line in self.lines)


OTHER_TEAMS = "other"  # the key of the aggregate; its label is translated by the page


def _team_sums(cluster_ids: list[int]) -> list[dict]:
    """Per cluster, resource and team, the sums of the guarantees and of the caps, by team
    slug: one query in SQL (the same on PostgreSQL and SQLite), as the ORM's grouping took
    longer to build than to run."""
    if not cluster_ids:
        return []
    names = tables(allocation=Allocation, namespace=TeamNamespace, team=Team, resource=Resource)
    sql = f"""
        SELECT tn.cluster_id, a.resource_id, MAX(r.name), MAX(r.display_name), MAX(r.unit),
            tn.team_id, MAX(t.slug), SUM(a.guarantee), SUM(a.cap)
        FROM {names["allocation"]} a
        JOIN {names["namespace"]} tn ON tn.id = a.team_namespace_id
        JOIN {names["team"]} t ON t.id = tn.team_id
        JOIN {names["resource"]} r ON r.id = a.resource_id
        WHERE tn.cluster_id {in_list(cluster_ids)}
        GROUP BY tn.cluster_id, a.resource_id, tn.team_id
        ORDER BY 7
    """  # noqa: S608 - the models' table names and placeholders: no value is written in
    with connection.cursor() as cursor:
        cursor.execute(sql, cluster_ids)
        found = cursor.fetchall()
    rows = []
    for row in found:
        values = dict(zip(_SUM_KEYS, row, strict=True))
        values["g"], values["c"] = db_decimal(values["g"]), db_decimal(values["c"])
        rows.append(values)
    return rows


_SUM_KEYS = (
    "team_namespace__cluster_id",
    "resource_id",
    "resource__name",
    "resource__display_name",
    "resource__unit",
    "team_namespace__team_id",
    "team_namespace__team__slug",
    "g",
    "c",
)


def _shares(rows: list[dict], visible: set[int] | None, others_label: str) -> list[Share]:
    """Named shares of the visible teams, then one aggregate of the others (if they hold any
    rows): a lead never gets another team's name or figures, only the others' total."""
    named, others, any_other = [], [ZERO, ZERO], False
    for row in rows:
        if visible is None or row["team_namespace__team_id"] in visible:
            slug = row["team_namespace__team__slug"]
            named.append(Share(slug, slug, row["g"], row["c"]))
        else:
            any_other = True
            others[0] += row["g"]
            others[1] += row["c"]
    if any_other:
        named.append(Share(others_label, None, others[0], others[1]))
    return named


def capacity_by_team(
    *,
    user: AnyUser,
    clusters: list[Cluster],
    capacities: list[ClusterCapacity],
    others_label: str,
) -> list[ClusterLines]:
    """Per cluster (in the order given: by name) and resource: capacity, sums of guarantees and
    caps, and the shares of the teams. The clusters and their capacities (with their
    resources) are the caller's; one query, plus the user's teams."""
    visible = visible_team_ids(user)
    capacity_of = {(c.cluster_id, c.resource_id): c for c in capacities}
    sums: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for row in _team_sums([cluster.pk for cluster in clusters]):
        sums[(row["team_namespace__cluster_id"], row["resource_id"])].append(row)
    out = []
    for cluster in clusters:
        lines = []
        keys = {k for k in (*capacity_of, *sums) if k[0] == cluster.pk}
        for key in keys:
            rows, capacity = sums.get(key, []), capacity_of.get(key)
            resource = capacity.resource if capacity else None
            first = rows[0] if rows else {}
            lines.append(
                ResourceLine(
                    cluster=cluster.name,
                    resource=resource.name if resource else first["resource__name"],
                    display_name=(
                        resource.display_name if resource else first["resource__display_name"]
                    ),
                    unit=resource.unit if resource else first["resource__unit"],
                    capacity=capacity.capacity if capacity else None,
                    guaranteed=sum((r["g"] for r in rows), ZERO),
                    capped=sum((r["c"] for r in rows), ZERO),
                    shares=_shares(rows, visible, others_label),
                )
            )
        lines.sort(key=lambda line: line.resource)
        out.append(ClusterLines(cluster, lines))
    return out


def findings_visible_to(user: AnyUser, findings: list[Finding]) -> list[Finding]:
    """Findings about a whole cluster and resource, and those about the user's own namespaces
    (admins and auditors: all); one query for a lead or member."""
    visible = visible_team_ids(user)
    if visible is None:
        return findings
    own = set(
        TeamNamespace.objects.filter(team_id__in=visible).values_list("cluster__name", "name")
    )
    return [f for f in findings if not f.namespace or (f.cluster, f.namespace) in own]


# --- the cross-cluster summary ---------------------------------------------------------------


@dataclass(frozen=True)
class Amounts:
    guarantee: Decimal
    cap: Decimal


@dataclass
class SummaryRow:
    label: str
    team: Team | None  # None for the other teams' aggregate and for the total
    cells: list[Amounts | None]  # one per column (cluster × resource)
    totals: list[Amounts | None]  # one per resource, over every cluster
    # What a phone shows before each cell when the rows stack: its column, "cluster · resource".
    cell_labels: list[str] = field(default_factory=list)
    total_labels: list[str] = field(default_factory=list)

    @property
    def labelled_cells(self) -> list[tuple[Amounts | None, str]]:
        return list(zip(self.cells, self.cell_labels, strict=True))

    @property
    def labelled_totals(self) -> list[tuple[Amounts | None, str]]:
        return list(zip(self.totals, self.total_labels, strict=True))


@dataclass
class PlanSummary:
    columns: list[tuple[str, str]]  # (cluster, resource)
    resources: list[str]
    capacities: list[Decimal | None]  # one per column
    capacity_totals: list[Decimal | None]  # one per resource, over the clusters that record it
    rows: list[SummaryRow]
    others: SummaryRow | None
    total: SummaryRow

    @property
    def width(self) -> int:
        """Columns of the table: the team, one per cluster and resource, one per resource."""
        return 1 + len(self.columns) + len(self.resources)

    @property
    def labelled_capacities(self) -> list[tuple[Decimal | None, str]]:
        return list(zip(self.capacities, self.total.cell_labels, strict=True))

    @property
    def labelled_capacity_totals(self) -> list[tuple[Decimal | None, str]]:
        return list(zip(self.capacity_totals, self.total.total_labels, strict=True))

    @property
    def clusters(self) -> list[tuple[str, int]]:
        """Each cluster with the number of its columns, in column order (for the header)."""
        spans: dict[str, int] = {}
        for cluster, _ in self.columns:
            spans[cluster] = spans.get(cluster, 0) + 1
        return list(spans.items())


def _add(a: Amounts | None, g: Decimal, c: Decimal) -> Amounts:
    return Amounts(g, c) if a is None else Amounts(a.guarantee + g, a.cap + c)


def _summary_row(
    label: str,
    team: Team | None,
    sums: dict[tuple[str, str], Amounts],
    columns,
    resources,
    all_clusters_label: str,
) -> SummaryRow:
    totals: dict[str, Amounts] = {}
    for (_, resource), amounts in sums.items():
        totals[resource] = _add(totals.get(resource), amounts.guarantee, amounts.cap)
    return SummaryRow(
        label=label,
        team=team,
        cells=[sums.get(col) for col in columns],
        totals=[totals.get(r) for r in resources],
        cell_labels=[f"{cluster} · {resource}" for cluster, resource in columns],
        total_labels=[f"{all_clusters_label} · {resource}" for resource in resources],
    )


def plan_summary(
    *, user: AnyUser, others_label: str, total_label: str, all_clusters_label: str = "all"
) -> PlanSummary:
    """One row per team the user may see with its guarantee and cap on every cluster and
    resource, and its totals per resource; then (for a lead or member) one row of every other
    team together, and the total. Three queries, plus the user's teams."""
    visible = visible_team_ids(user)
    teams = Team.objects.order_by("slug")
    if visible is not None:
        teams = teams.filter(id__in=visible)
    capacities = {
        (c.cluster.name, c.resource.name): c.capacity
        for c in ClusterCapacity.objects.select_related("cluster", "resource")
    }
    per_team: dict[int | None, dict[tuple[str, str], Amounts]] = defaultdict(dict)
    everything: dict[tuple[str, str], Amounts] = {}
    rows = Allocation.objects.values(
        "team_namespace__team_id", "team_namespace__cluster__name", "resource__name"
    ).annotate(g=Sum("guarantee"), c=Sum("cap"))
    for row in rows:
        col = (row["team_namespace__cluster__name"], row["resource__name"])
        team_id = row["team_namespace__team_id"]
        owner = team_id if visible is None or team_id in visible else None
        per_team[owner][col] = _add(per_team[owner].get(col), row["g"], row["c"])
        everything[col] = _add(everything.get(col), row["g"], row["c"])
    columns = sorted(set(capacities) | set(everything))
    resources = sorted({r for _, r in columns})
    summary_rows = [
        _summary_row(t.slug, t, per_team.get(t.pk, {}), columns, resources, all_clusters_label)
        for t in teams
    ]
    others = None
    if None in per_team:
        others = _summary_row(
            others_label, None, per_team[None], columns, resources, all_clusters_label
        )
    capacity_totals: dict[str, Decimal] = {}
    for (_, resource), capacity in capacities.items():
        capacity_totals[resource] = capacity_totals.get(resource, Decimal(0)) + capacity
    return PlanSummary(
        columns=columns,
        resources=resources,
        capacities=[capacities.get(col) for col in columns],
        capacity_totals=[capacity_totals.get(r) for r in resources],
        rows=summary_rows,
        others=others,
        total=_summary_row(total_label, None, everything, columns, resources, all_clusters_label),
    )
