"""Budgets across clusters, read for the people and the rules: what temporary grants promise
on top of the caps, and per team its GPUs over every cluster, its ceiling against what the
ceiling counts, and their cost per month (quotas.budgets counts and prices them).

Here rather than in quotas because the promises of temporary grants are requests' lines."""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from django.conf import settings
from django.db import connection

from approvals.models import QuotaRequest, RequestLine
from common.amounts import money
from common.sql import db_decimal, in_list
from quotas.budgets import HOURS_PER_MONTH, gpu_figure, gpus_per_unit
from quotas.models import Resource, Team, TeamNamespace
from quotas.roles import AnyUser, sees_everything
from quotas.selectors import TeamGpus, TeamTree, ceiling_totals, team_gpus, team_ids_of

# Temporary grants whose lines are applied: they end by restoring the allocation.
S = QuotaRequest.Status
STARTED = (S.APPLYING, S.ACTIVE, S.FAILED)


def gpus_of(line: RequestLine) -> Fraction | None:
    """What one unit of the line's resource counts as in GPUs (None: not counted)."""
    resource = line.resource
    return gpus_per_unit(kind=resource.kind, name=resource.name, gpu_model=resource.gpu_model)


@dataclass(frozen=True)
class HoldingLine:
    """A line of a temporary grant that holds capacity (holding_lines), as the plan check
    and the ceilings read it."""

    cluster_id: int
    namespace_id: int
    namespace: str
    workload_class: str
    team_id: int
    resource_id: int
    resource: str
    # What one unit counts as in GPUs (None: not counted).
    gpus_per_unit: Fraction | None
    approved: bool  # approved and waiting for its start (else started)
    current_guarantee: Decimal
    final_guarantee: Decimal
    current_cap: Decimal
    final_cap: Decimal

    def _held(self, current: Decimal, final: Decimal) -> Decimal:
        # An approved grant's increase is promised already; a started grant's decrease comes
        # back at its end. Zero or less: nothing held.
        return final - current if self.approved else current - final

    @property
    def held_guarantee(self) -> Decimal:
        """The guarantee the line holds on top of the allocation (zero or less: none)."""
        return self._held(self.current_guarantee, self.final_guarantee)

    @property
    def held_cap(self) -> Decimal:
        """The cap the line holds on top of the allocation (zero or less: none)."""
        return self._held(self.current_cap, self.final_cap)


def holding_lines(
    *, cluster_ids: Iterable[int] | None = None, exclude_request_id: int | None = None
) -> list[HoldingLine]:
    """Lines of the temporary grants that hold capacity: approved and waiting for their
    start, or started (applied) and not ended yet; on these clusters only when given, without
    the request ``exclude_request_id`` (the one in question). Oldest line first.

    One query in SQL (the same on PostgreSQL and SQLite): every plan check runs it, most
    often to find nothing, and the ORM took more than the query to build and compile it."""
    where = [
        "q.kind = %s",
        f"(q.status = %s OR (q.status {in_list(STARTED)} AND l.applied_version IS NOT NULL))",
    ]
    params: list = [QuotaRequest.Kind.TEMPORARY, S.APPROVED, *STARTED]
    if exclude_request_id is not None:
        where.append("q.id <> %s")
        params.append(exclude_request_id)
    if cluster_ids is not None:
        clusters = list(cluster_ids)
        if not clusters:
            return []
        where.append(f"tn.cluster_id {in_list(clusters)}")
        params += clusters
    sql = f"""
        SELECT tn.cluster_id, l.team_namespace_id, tn.name, tn.workload_class, tn.team_id,
            l.resource_id, r.name, r.kind, r.gpu_model, q.status,
            l.current_guarantee, COALESCE(l.decided_guarantee, l.requested_guarantee),
            l.current_cap, COALESCE(l.decided_cap, l.requested_cap)
        FROM {RequestLine._meta.db_table} l
        JOIN {QuotaRequest._meta.db_table} q ON q.id = l.request_id
        JOIN {TeamNamespace._meta.db_table} tn ON tn.id = l.team_namespace_id
        JOIN {Resource._meta.db_table} r ON r.id = l.resource_id
        WHERE {" AND ".join(where)}
        ORDER BY l.id
    """  # noqa: S608 - the models' table names and placeholders: no value is written in
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [
        HoldingLine(
            cluster_id=cluster_id,
            namespace_id=namespace_id,
            namespace=namespace,
            workload_class=workload_class,
            team_id=team_id,
            resource_id=resource_id,
            resource=resource,
            gpus_per_unit=gpus_per_unit(kind=kind, name=resource, gpu_model=gpu_model),
            approved=status == S.APPROVED,
            current_guarantee=db_decimal(current_guarantee),
            final_guarantee=db_decimal(final_guarantee),
            current_cap=db_decimal(current_cap),
            final_cap=db_decimal(final_cap),
        )
        for (
            cluster_id,
            namespace_id,
            namespace,
            workload_class,
            team_id,
            resource_id,
            resource,
            kind,
            gpu_model,
            status,
            current_guarantee,
            final_guarantee,
            current_cap,
            final_cap,
        ) in rows
    ]


def held_caps(exclude_request_id: int | None = None) -> dict[int, Fraction]:
    """Per team id, the capped GPUs temporary grants promise on top of the allocations (as
    the plan check does for the guarantee: an approved grant's increase, a started grant's
    decrease that comes back at its end)."""
    held: dict[int, Fraction] = defaultdict(Fraction)
    for line in holding_lines(exclude_request_id=exclude_request_id):
        amount = line.held_cap
        if amount > 0 and line.gpus_per_unit is not None:
            held[line.team_id] += Fraction(amount) * line.gpus_per_unit
    return dict(held)


# --- budgets across clusters -------------------------------------------------------------------


@dataclass
class BudgetRow:
    """A team's GPUs over every cluster (quotas.budgets counts them), its ceiling and what the
    GPUs cost per month; or the other teams' together, or the total."""

    label: str
    team: Team | None
    gpus: TeamGpus
    ceiling: Decimal | None = None
    counted: Fraction | None = None  # the caps its ceiling counts (with the teams under it)
    with_teams_under: bool = False
    priced: bool = True  # some GPUs are on a cluster with a price (else no cost is shown)

    @property
    def guaranteed(self) -> Decimal:
        return gpu_figure(self.gpus.guaranteed)

    @property
    def capped(self) -> Decimal:
        return gpu_figure(self.gpus.capped)

    @property
    def counted_figure(self) -> Decimal | None:
        return None if self.counted is None else gpu_figure(self.counted)

    @property
    def over_ceiling(self) -> bool:
        return (
            self.ceiling is not None
            and self.counted is not None
            and (self.counted > Fraction(self.ceiling))
        )

    @property
    def ceiling_percent(self) -> int | None:
        if self.ceiling is None or self.counted is None or not self.ceiling:
            return None
        return round(self.counted / Fraction(self.ceiling) * 100)

    @property
    def guaranteed_per_month(self) -> Decimal | None:
        return money(self.gpus.guaranteed_per_hour * HOURS_PER_MONTH) if self.priced else None

    @property
    def capped_per_month(self) -> Decimal | None:
        return money(self.gpus.capped_per_hour * HOURS_PER_MONTH) if self.priced else None

    @property
    def unpriced(self) -> Decimal | None:
        return gpu_figure(self.gpus.unpriced) if self.gpus.unpriced else None


@dataclass
class Budgets:
    rows: list[BudgetRow]
    others: BudgetRow | None
    total: BudgetRow
    currency: str
    priced: bool  # some GPUs are on a cluster with a GPU-hour price
    hours_per_month: int = HOURS_PER_MONTH


def team_budgets(*, user: AnyUser, others_label: str, total_label: str) -> Budgets:
    """One row per team the user may see with its GPUs guaranteed and capped over every
    cluster, its ceiling against what the ceiling counts, and the cost per month; then (for a
    lead or member) the other teams together, and the total. A fixed number of queries."""
    visible = None if sees_everything(user) else team_ids_of(user)
    every_team = list(Team.objects.order_by("slug"))
    tree = TeamTree.of(every_team)
    teams = [t for t in every_team if visible is None or t.pk in visible]
    gpus = team_gpus()
    priced = any(g.priced for g in gpus.values())
    ceilings = ceiling_totals(
        tree,
        [t.pk for t in teams if t.pk in tree.ceilings],
        held=held_caps() if tree.ceilings else None,
        gpus=gpus,
    )
    rows = []
    for team in teams:
        facts = ceilings.get(team.pk)
        rows.append(
            BudgetRow(
                label=team.slug,
                team=team,
                gpus=gpus.get(team.pk, TeamGpus()),
                ceiling=facts.ceiling if facts else None,
                counted=facts.capped if facts else None,
                with_teams_under=bool(facts and facts.with_teams_under),
                priced=priced,
            )
        )
    others = None
    if visible is not None:
        rest = TeamGpus()
        for team_id, team_gpus_ in gpus.items():
            if team_id not in visible:
                rest.add(team_gpus_)
        if rest.capped:
            others = BudgetRow(label=others_label, team=None, gpus=rest, priced=priced)
    total = TeamGpus()
    for team_gpus_ in gpus.values():
        total.add(team_gpus_)
    return Budgets(
        rows=rows,
        others=others,
        total=BudgetRow(label=total_label, team=None, gpus=total, priced=priced),
        currency=settings.QUOTA_CURRENCY,
        priced=priced,
    )
