"""Budgets across clusters, read for the people and the rules: what temporary grants promise
on top of the caps, and per team its GPUs over every cluster, its ceiling against what the
ceiling counts, and their cost per month (quotas.budgets counts and prices them).

Here rather than in quotas because the promises of temporary grants are requests' lines."""

from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from django.conf import settings
from django.db.models import Q

from approvals.models import QuotaRequest, RequestLine
from common.amounts import money
from quotas.budgets import HOURS_PER_MONTH, gpu_figure, gpus_per_unit
from quotas.models import Team
from quotas.roles import AnyUser, sees_everything
from quotas.selectors import TeamGpus, TeamTree, ceiling_totals, team_gpus, team_ids_of

# Temporary grants whose lines are applied: they end by restoring the allocation.
STARTED = (
    QuotaRequest.Status.APPLYING,
    QuotaRequest.Status.ACTIVE,
    QuotaRequest.Status.FAILED,
)


def gpus_of(line: RequestLine) -> Fraction | None:
    """What one unit of the line's resource counts as in GPUs (None: not counted)."""
    resource = line.resource
    return gpus_per_unit(kind=resource.kind, name=resource.name, gpu_model=resource.gpu_model)


def holding_grant_lines(exclude_request_id: int | None = None):
    """Lines of the temporary grants that hold capacity: approved and waiting for their
    start, or started (applied) and not ended yet."""
    return (
        RequestLine.objects.filter(
            Q(request__status=QuotaRequest.Status.APPROVED)
            | Q(request__status__in=STARTED, applied_version__isnull=False),
            request__kind=QuotaRequest.Kind.TEMPORARY,
        )
        .exclude(request_id=exclude_request_id)
        .select_related("team_namespace", "resource", "request")
    )


def held_caps(exclude_request_id: int | None = None) -> dict[int, Fraction]:
    """Per team id, the capped GPUs temporary grants promise on top of the allocations (as
    _held does for the guarantee: an approved grant's increase, a started grant's decrease
    that comes back at its end)."""
    held: dict[int, Fraction] = defaultdict(Fraction)
    grants = holding_grant_lines(exclude_request_id).only(
        "team_namespace__team_id",
        "resource__kind",
        "resource__name",
        "resource__gpu_model",
        "request__status",
        "current_cap",
        "requested_cap",
        "decided_cap",
    )
    for line in grants:
        change = line.final_cap - line.current_cap
        amount = change if line.request.status == QuotaRequest.Status.APPROVED else -change
        per_unit = gpus_of(line)
        if amount > 0 and per_unit is not None:
            held[line.team_namespace.team_id] += Fraction(amount) * per_unit
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
