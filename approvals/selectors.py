"""Reads of requests, scoped to who asks; previews of what a request would write."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal

from django.db import connection
from django.db.models import (
    Count,
    Max,
    Q,
    QuerySet,
    Sum,
)
from django.utils.translation import gettext as _

from approvals.access import restrict
from approvals.models import Approval, QuotaRequest, RequestLine
from approvals.transitions import ALLOWED
from approvals.validation import held_by_grants
from common.amounts import format_amount
from common.sql import db_decimal, db_json, db_moment, in_list
from quotas.kube.plan import AllocationChange, resource_plan
from quotas.mig import mig_profile_of
from quotas.mig_display import layout_cells
from quotas.models import (
    Allocation,
    AuditEvent,
    Cluster,
    ClusterCapacity,
    Resource,
    SyncRequest,
    Team,
    TeamNamespace,
)
from quotas.roles import AnyUser
from quotas.selectors import TeamScope, capacity_summary, mig_layouts

BASE_FIELDS = ("guarantee", "cap", "per_pod_max", "priority_classes")


def requests_visible_to(user: AnyUser, *, scope: TeamScope | None = None) -> QuerySet[QuotaRequest]:
    """Admins and auditors see every request; people of a team see their team's (the
    rulebook's answer, approvals.access.restrict; ``scope``: the user's teams as the request
    read them already)."""
    return restrict(QuotaRequest.objects.all(), user, "view", scope=scope)


def allocation_changes(lines) -> dict[tuple[int, str], list[AllocationChange]]:
    """Per (cluster id, name), the allocation changes the lines' final values make. Read from
    the lines in memory, so a caller may collect them inside a transaction it rolls back."""
    changes: dict[tuple[int, str], list[AllocationChange]] = defaultdict(list)
    for line in lines:
        resource = line.resource
        cluster = line.team_namespace.cluster
        changes[(cluster.pk, cluster.name)].append(
            AllocationChange(
                namespace=line.team_namespace.name,
                resource=resource_plan(resource),
                guarantee=line.final_guarantee,
                cap=line.final_cap,
                per_pod_max=line.final_per_pod_max,
                priority_classes=tuple(line.final_priority_classes),
            )
        )
    return changes


def allocation_values(allocation: Allocation | None) -> dict:
    """The fields a request line changes, as they stand (none yet: 0, 0, none, every class)."""
    if allocation is None:
        return {
            "guarantee": Decimal(0),
            "cap": Decimal(0),
            "per_pod_max": None,
            "priority_classes": [],
        }
    return {
        "guarantee": allocation.guarantee,
        "cap": allocation.cap,
        "per_pod_max": allocation.per_pod_max,
        "priority_classes": sorted(allocation.priority_classes),
    }


def line_base_values(line: RequestLine) -> dict:
    """The allocation the line was written against: its current_* values are read at the
    base version (at creation, at submit while unchanged, and at each rebase)."""
    return {
        "guarantee": line.current_guarantee,
        "cap": line.current_cap,
        "per_pod_max": line.current_per_pod_max,
        "priority_classes": sorted(line.current_priority_classes),
    }


def _text(value) -> object:
    return value if isinstance(value, list) else format_amount(value)


def _allocations_of(lines: list[RequestLine]) -> dict[tuple[int, int], Allocation]:
    """The allocations the lines change, by (namespace id, resource id), in one read."""
    if not lines:
        return {}
    wanted = Q()
    for line in lines:
        wanted |= Q(team_namespace_id=line.team_namespace_id, resource_id=line.resource_id)
    return {(a.team_namespace_id, a.resource_id): a for a in Allocation.objects.filter(wanted)}


def request_base_changes(lines: list[RequestLine]) -> list[dict]:
    """What changed in the allocations since each line was written: one entry per field whose
    value differs between the line's base version and the allocation now (none: up to date).

    The approval refuses a request with changes (a lost update otherwise) and the request
    page offers a rebase; both ask this one function.
    """
    changes = []
    allocations = _allocations_of(lines)
    for index, line in enumerate(lines):
        allocation = allocations.get((line.team_namespace_id, line.resource_id))
        version = allocation.version if allocation else None
        if version == line.base_version:
            continue
        base, now = line_base_values(line), allocation_values(allocation)
        for field in BASE_FIELDS:
            if base[field] != now[field]:
                changes.append(
                    {
                        "line": line.pk,
                        "index": index,
                        "cluster": line.team_namespace.cluster.name,
                        "namespace": line.team_namespace.name,
                        "resource": line.resource.name,
                        "field": field,
                        "base": _text(base[field]),
                        "current": _text(now[field]),
                        "base_version": line.base_version,
                        "current_version": version,
                    }
                )
    return changes


def allocation_values_now(line: RequestLine) -> tuple[Allocation | None, dict]:
    allocation = Allocation.objects.filter(
        team_namespace_id=line.team_namespace_id, resource_id=line.resource_id
    ).first()
    return allocation, allocation_values(allocation)


# --- the request pages ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListedLine:
    """A line of a request as the request list shows it."""

    namespace: str
    cluster: str
    resource: str
    current_guarantee: Decimal | None
    current_cap: Decimal | None
    requested_guarantee: Decimal
    requested_cap: Decimal
    decided_guarantee: Decimal | None
    decided_cap: Decimal | None


@dataclass(frozen=True, slots=True)
class ListedRequest:
    """A request as its row of the request list shows it (``pk`` as a model's, so the plan
    check takes it as it takes a request)."""

    pk: int
    team: str
    status: str
    kind: str
    extends_id: int | None
    extends_ends_at: datetime | None
    ends_at: datetime | None
    submitted_at: datetime | None
    auto_approved: bool
    approvals_needed: int
    approvals_given: int
    requested_by_id: int
    requester: str
    lines: tuple[ListedLine, ...]
    # A waiting request's lines as the plan check reads them (requests_fit_problems'
    # ``lines_of``); none for the others.
    plan_lines: tuple[RequestLine, ...]

    @property
    def is_extension(self) -> bool:
        return self.kind == QuotaRequest.Kind.EXTENSION


def requests_listed(ids: list[int]) -> list[ListedRequest]:
    """The rows of the request list for these requests (who may see them is the caller's
    question: it pages a requests_visible_to queryset), in the order of ``ids``: one
    statement, each request's lines joined to it, read as rows; what a request has one of
    (its team, requester, the grant it extends) read by subqueries, which PostgreSQL plans in
    a third of the time the same joins took.

    Written in SQL (the same on PostgreSQL and SQLite): through the ORM, the page's requests
    and their prefetched lines, namespaces, clusters and resources took four times the
    statement's own time to build as queries and as objects."""
    if not ids:
        return []
    user_model = QuotaRequest._meta.get_field("requested_by").related_model
    username = user_model._meta.get_field(user_model.USERNAME_FIELD).column
    tables = {
        "request": QuotaRequest._meta.db_table,
        "approval": Approval._meta.db_table,
        "line": RequestLine._meta.db_table,
        "team": Team._meta.db_table,
        "user": user_model._meta.db_table,
        "namespace": TeamNamespace._meta.db_table,
        "cluster": Cluster._meta.db_table,
        "resource": Resource._meta.db_table,
    }
    sql = """
        SELECT q.id, (SELECT t.slug FROM {team} t WHERE t.id = q.team_id), q.status, q.kind,
            q.extends_id, (SELECT e.ends_at FROM {request} e WHERE e.id = q.extends_id),
            q.ends_at, q.submitted_at, q.auto_approved, q.approvals_needed,
            (SELECT COUNT(*) FROM {approval} a WHERE a.request_id = q.id),
            q.requested_by_id, (SELECT u.{username} FROM {user} u WHERE u.id = q.requested_by_id),
            l.id, tn.name, c.name, r.name, l.current_guarantee, l.current_cap,
            l.requested_guarantee, l.requested_cap, l.decided_guarantee, l.decided_cap,
            l.requested_per_pod_max, l.decided_per_pod_max, l.requested_priority_classes,
            l.decided_priority_classes, l.team_namespace_id, tn.cluster_id, tn.workload_class,
            tn.team_id, l.resource_id, r.unit, r.kind, r.gpu_model
        FROM {request} q
        LEFT JOIN {line} l ON l.request_id = q.id
        LEFT JOIN {namespace} tn ON tn.id = l.team_namespace_id
        LEFT JOIN {cluster} c ON c.id = tn.cluster_id
        LEFT JOIN {resource} r ON r.id = l.resource_id
        WHERE q.id {ids}
        ORDER BY q.id, l.id
    """.format(**tables, username=username, ids=in_list(ids))  # noqa: S608 - the models'
    # table and column names and placeholders: no value is written in
    with connection.cursor() as cursor:
        cursor.execute(sql, ids)
        found = cursor.fetchall()
    heads: dict[int, tuple] = {}
    lines: dict[int, list[ListedLine]] = defaultdict(list)
    plan_lines: dict[int, list[RequestLine]] = defaultdict(list)
    for row in found:
        heads.setdefault(row[0], row[:13])
        if row[13] is None:
            continue
        amounts = [db_decimal(v) for v in row[17:25]]
        lines[row[0]].append(ListedLine(row[14], row[15], row[16], *amounts[:6]))
        if row[2] == QuotaRequest.Status.SUBMITTED:
            plan_lines[row[0]].append(_plan_line(row, amounts))
    listed = []
    for pk in ids:
        if pk not in heads:
            continue
        _, team, status, kind, extends_id, extends_ends_at, ends_at, submitted_at = heads[pk][:8]
        auto, needed, given, requested_by_id, requester = heads[pk][8:]
        listed.append(
            ListedRequest(
                pk=pk,
                team=team,
                status=status,
                kind=kind,
                extends_id=extends_id,
                extends_ends_at=db_moment(extends_ends_at),
                ends_at=db_moment(ends_at),
                submitted_at=db_moment(submitted_at),
                auto_approved=bool(auto),
                approvals_needed=needed,
                approvals_given=given,
                requested_by_id=requested_by_id,
                requester=requester,
                lines=tuple(lines[pk]),
                plan_lines=tuple(plan_lines[pk]),
            )
        )
    return listed


def _loaded(model, values: dict):
    """An instance of ``model`` with these fields, as the ORM loads a row with the others
    deferred (``Model.from_db``)."""
    names = [f.attname for f in model._meta.concrete_fields if f.attname in values]
    return model.from_db(connection.alias, names, [values[name] for name in names])


def _plan_line(row: tuple, amounts: list) -> RequestLine:
    """A line of requests_listed's statement as the plan check reads it: its amounts and
    priority classes, its namespace (cluster, workload class, team) and resource."""
    line = _loaded(
        RequestLine,
        {
            "id": row[13],
            "request_id": row[0],
            "team_namespace_id": row[27],
            "resource_id": row[31],
            "current_guarantee": amounts[0],
            "current_cap": amounts[1],
            "requested_guarantee": amounts[2],
            "requested_cap": amounts[3],
            "decided_guarantee": amounts[4],
            "decided_cap": amounts[5],
            "requested_per_pod_max": amounts[6],
            "decided_per_pod_max": amounts[7],
            "requested_priority_classes": db_json(row[25]),
            "decided_priority_classes": db_json(row[26]),
        },
    )
    line.team_namespace = _loaded(
        TeamNamespace,
        {
            "id": row[27],
            "name": row[14],
            "cluster_id": row[28],
            "workload_class": row[29],
            "team_id": row[30],
        },
    )
    line.resource = _loaded(
        Resource,
        {"id": row[31], "name": row[16], "unit": row[32], "kind": row[33], "gpu_model": row[34]},
    )
    return line


def request_status_counts(requests: QuerySet[QuotaRequest]) -> dict[str, int]:
    """How many of the requests are in each status (one query; statuses with none left out).
    ``requests`` holds each request once (the list's filters test lines with EXISTS, never
    join them). Counted as rows (``COUNT(*)``), which PostgreSQL may read from the status
    index alone, where counting ids read every request's row."""
    rows = requests.order_by().values("status").annotate(n=Count("*"))
    return {row["status"]: row["n"] for row in rows}


def request_lines(request: QuotaRequest) -> list[RequestLine]:
    return list(request.lines.select_related("team_namespace__cluster", "resource").order_by("id"))


def request_approvals(request: QuotaRequest) -> list[Approval]:
    return list(request.approvals.select_related("admin").order_by("created_at"))


def request_timeline(request: QuotaRequest) -> QuerySet[AuditEvent]:
    """The audit events of the request, oldest first; its comments are shown as its
    discussion (approvals.discussion), not again here."""
    return (
        AuditEvent.objects.filter(target_type="QuotaRequest", target_id=str(request.pk))
        .exclude(action="request.comment")
        .order_by("seq")
    )


def request_target_words(ids: list[int]) -> dict[int, dict[str, str]]:
    """How the audit log names requests: "request #2 of team-a" (quotas.audit.targets)."""
    rows = QuotaRequest.objects.filter(pk__in=ids).values_list("pk", "team__slug")
    return {
        pk: {"text": _("request #%(id)s of %(team)s") % {"id": pk, "team": team}, "team": team}
        for pk, team in rows
    }


def request_syncs(request: QuotaRequest) -> list[SyncRequest]:
    """The cluster syncs the request started (applying it, reverting a grant), oldest first."""
    return list(request.sync_requests.select_related("cluster").order_by("created_at", "id"))


def requests_live_versions(request_ids) -> dict[int, tuple]:
    """Per request id, what the live parts of the request pages depend on, read in two
    queries: the last audit event about the request (every change of a request is audited in
    its transaction, as its API ETag says) and the progress of its cluster syncs (a retry or a
    finished sync is not an event of the request). Ids without a request are left out."""
    ids = [int(pk) for pk in request_ids]
    versions: dict[int, list] = {pk: [0, []] for pk in ids}
    events = (
        AuditEvent.objects.filter(
            target_type=QuotaRequest.__name__, target_id__in=[str(pk) for pk in ids]
        )
        .order_by()
        .values_list("target_id")
        .annotate(last=Max("seq"))
    )
    for target_id, last in events:
        versions[int(target_id)][0] = last
    through = QuotaRequest.sync_requests.through
    for request_id, *sync in (
        through.objects.filter(quotarequest_id__in=ids)
        .order_by("quotarequest_id", "syncrequest_id")
        .values_list(
            "quotarequest_id",
            "syncrequest_id",
            "syncrequest__status",
            "syncrequest__attempts",
            "syncrequest__completed_at",
        )
    ):
        versions[request_id][1].append(tuple(sync))
    return {pk: (last, tuple(syncs)) for pk, (last, syncs) in versions.items()}


def request_is_settled(request: QuotaRequest, syncs: list[SyncRequest]) -> bool:
    """Nothing more will happen to the request by itself: its status allows no transition
    (approvals.transitions) and none of its syncs is pending or retried."""
    return not ALLOWED.get(request.status) and all(
        s.status == SyncRequest.Status.DONE for s in syncs
    )


@dataclass(frozen=True)
class CapacityImpact:
    """One cluster resource a request touches: capacity, what all teams are guaranteed and
    capped, and the request's team's part of it, before and after the request's values."""

    cluster: str
    resource: str
    unit: str
    capacity: Decimal
    guaranteed_before: Decimal
    guaranteed_after: Decimal
    capped_before: Decimal
    capped_after: Decimal
    team_guarantee_before: Decimal
    team_guarantee_after: Decimal
    team_cap_before: Decimal
    team_cap_after: Decimal

    @property
    def free_before(self) -> Decimal:
        return self.capacity - self.guaranteed_before

    @property
    def free_after(self) -> Decimal:
        return self.capacity - self.guaranteed_after

    @property
    def over_capacity_after(self) -> bool:
        return self.guaranteed_after > self.capacity

    def _share(self, value: Decimal) -> Decimal | None:
        if not self.capacity:
            return None
        return (value * 100 / self.capacity).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)

    @property
    def team_share_before(self) -> Decimal | None:
        """The team's guarantees as a percentage of the capacity."""
        return self._share(self.team_guarantee_before)

    @property
    def team_share_after(self) -> Decimal | None:
        return self._share(self.team_guarantee_after)

    @property
    def team_cap_share_before(self) -> Decimal | None:
        return self._share(self.team_cap_before)

    @property
    def team_cap_share_after(self) -> Decimal | None:
        return self._share(self.team_cap_after)


def request_impact(lines: list[RequestLine], *, team_id: int) -> list[CapacityImpact]:
    """What the lines' final values do to each cluster resource they touch, against the
    allocations as they are now (the lines' current values are those allocations). Three
    queries whatever the number of lines, teams or allocations; a resource without capacity
    on its cluster has no row (the rules report it)."""
    if not lines:
        return []
    deltas: dict[tuple[str, str], list[Decimal]] = defaultdict(lambda: [Decimal(0)] * 2)
    cluster_ids: set[int] = set()
    resource_ids: set[int] = set()
    for line in lines:
        key = (line.team_namespace.cluster.name, line.resource.name)
        deltas[key][0] += line.final_guarantee - line.current_guarantee
        deltas[key][1] += line.final_cap - line.current_cap
        cluster_ids.add(line.team_namespace.cluster_id)
        resource_ids.add(line.resource_id)
    team = {
        (row["team_namespace__cluster__name"], row["resource__name"]): row
        for row in Allocation.objects.filter(
            team_namespace__team_id=team_id,
            team_namespace__cluster_id__in=cluster_ids,
            resource_id__in=resource_ids,
        )
        .values("team_namespace__cluster__name", "resource__name")
        .annotate(guarantee=Sum("guarantee"), cap=Sum("cap"))
    }
    # Temporary grants hold guarantee the allocations do not show: promised all the same.
    held = held_by_grants(cluster_ids)
    rows = []
    for capacity in capacity_summary(cluster_ids=sorted(cluster_ids)):
        key = (capacity.cluster, capacity.resource)
        if key not in deltas:
            continue
        guarantee_delta, cap_delta = deltas[key]
        guaranteed = capacity.guaranteed + held.get(key, Decimal(0))
        mine = team.get(key, {})
        team_guarantee = mine.get("guarantee") or Decimal(0)
        team_cap = mine.get("cap") or Decimal(0)
        rows.append(
            CapacityImpact(
                cluster=capacity.cluster,
                resource=capacity.resource,
                unit=capacity.unit,
                capacity=capacity.capacity,
                guaranteed_before=guaranteed,
                guaranteed_after=guaranteed + guarantee_delta,
                capped_before=capacity.capped,
                capped_after=capacity.capped + cap_delta,
                team_guarantee_before=team_guarantee,
                team_guarantee_after=team_guarantee + guarantee_delta,
                team_cap_before=team_cap,
                team_cap_after=team_cap + cap_delta,
            )
        )
    return sorted(rows, key=lambda row: (row.cluster, row.resource))


def impact_mig_layouts(impact: list[CapacityImpact]) -> list[dict]:
    """For each cluster whose MIG slices the request changes and whose cards are known: how
    its guaranteed MIG instances are cut from its cards now and after the request (quotas.mig;
    a layout to cut the cards to when the mix changes). No query unless a MIG resource is in
    the impact."""
    touched = [row for row in impact if mig_profile_of(row.resource)]
    if not touched:
        return []
    out = []
    for cluster in Cluster.objects.filter(name__in={row.cluster for row in touched}).order_by(
        "name"
    ):
        if not cluster.gpu_cards:
            continue
        resources = [
            c.resource
            for c in ClusterCapacity.objects.filter(cluster=cluster).select_related("resource")
        ]
        now = {
            line.resource: line.guaranteed for line in capacity_summary(cluster_ids=[cluster.pk])
        }
        after = {
            **now,
            **{
                row.resource: row.guaranteed_after for row in touched if row.cluster == cluster.name
            },
        }
        for before_plan, after_plan in zip(
            mig_layouts(cluster, now, resources),
            mig_layouts(cluster, after, resources),
            strict=True,
        ):
            out.append(
                {
                    "cluster": cluster.name,
                    "before": layout_cells(before_plan),
                    "after": layout_cells(after_plan),
                    "changed": before_plan.demand != after_plan.demand,
                }
            )
    return out
