"""The seed's canary metrics per team of a cluster over a period, from the daily rollups: mean
GPU utilization (weighted by GPU-hours: a team that used a hundred GPUs for a day weighs a
hundred times one that used one), queue wait, evicted tasks and borrowing between teams."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from django.db.models import Avg, Count, F, Max, Q, Sum
from django.utils.translation import gettext as _

from common.errors import ValidationFailed
from quotas.models import Cluster, Resource, Team
from quotas.roles import AnyUser
from quotas.selectors import teams_visible_to
from usage.models import UsageDaily

ZERO = Decimal(0)
MAX_PERIOD_DAYS = 400


@dataclass(frozen=True)
class CanaryRow:
    team: str  # "" for the whole cluster (the teams the user may see)
    days: int
    gpu_hours: Decimal
    borrowed_gpu_hours: Decimal
    idle_guaranteed_gpu_hours: Decimal
    utilization_mean: Decimal | None
    queue_wait_mean_seconds: int | None
    queue_wait_max_seconds: int | None
    evictions: int

    @property
    def borrowing_ratio(self) -> Decimal | None:
        """Share of the GPU-hours used above the guarantee, i.e. borrowed from other teams."""
        if not self.gpu_hours:
            return None
        return (self.borrowed_gpu_hours / self.gpu_hours).quantize(Decimal("0.001"))


def canary_period_check(start: date | None, end: date | None) -> None:
    if start is None:
        raise ValidationFailed(_("start: give a day as YYYY-MM-DD"), field="start")
    if end is None:
        raise ValidationFailed(_("end: give a day as YYYY-MM-DD"), field="end")
    if end < start:
        raise ValidationFailed(_("end: must not be before start"), field="end")
    if (end - start).days >= MAX_PERIOD_DAYS:
        raise ValidationFailed(
            _("end: a period is at most %(days)s days") % {"days": MAX_PERIOD_DAYS}, field="end"
        )


def _q(value, places: str) -> Decimal | None:
    return None if value is None else Decimal(value).quantize(Decimal(places))


def canary_metrics(
    *,
    user: AnyUser,
    cluster: Cluster,
    start: date,
    end: date,
    team: Team | None = None,
    resource: Resource | None = None,
) -> list[CanaryRow]:
    """One row per visible team with usage on the cluster in [start, end], then the total
    (team ""); of one resource when given (hours of different resources do not add up). One
    grouped query over the rollups."""
    canary_period_check(start, end)
    days = UsageDaily.objects.filter(
        team_namespace__cluster=cluster,
        team_namespace__team__in=teams_visible_to(user),
        day__gte=start,
        day__lte=end,
    )
    if team is not None:
        days = days.filter(team_namespace__team=team)
    if resource is not None:
        days = days.filter(resource=resource)
    # Utilization is of the GPUs in use: each day's mean counts by the GPU-hours it covers.
    measured = Q(utilization_mean__isnull=False, gpu_hours__gt=0)
    figures = {
        "n_days": Count("day", distinct=True),
        "hours": Sum("gpu_hours"),
        "borrowed": Sum("borrowed_gpu_hours"),
        "idle": Sum("idle_guaranteed_gpu_hours"),
        "util_weighted": Sum(F("utilization_mean") * F("gpu_hours"), filter=measured),
        "util_hours": Sum("gpu_hours", filter=measured),
        "wait_mean": Avg("pending_wait_mean_seconds"),
        "wait_max": Max("pending_wait_seconds"),
        "evictions": Sum("evictions"),
    }
    rows = [
        _row(r["team_namespace__team__slug"], r)
        for r in days.values("team_namespace__team__slug")
        .annotate(**figures)
        .order_by("team_namespace__team__slug")
    ]
    total = days.aggregate(**figures)
    if total["n_days"]:
        rows.append(_row("", total))
    return rows


def _row(team: str, r: dict) -> CanaryRow:
    util = None
    if r["util_hours"]:
        util = _q(Decimal(r["util_weighted"]) / Decimal(r["util_hours"]), "0.1")
    return CanaryRow(
        team=team,
        days=r["n_days"],
        gpu_hours=_q(r["hours"] or 0, "0.1"),
        borrowed_gpu_hours=_q(r["borrowed"] or 0, "0.1"),
        idle_guaranteed_gpu_hours=_q(r["idle"] or 0, "0.1"),
        utilization_mean=util,
        queue_wait_mean_seconds=None if r["wait_mean"] is None else round(r["wait_mean"]),
        queue_wait_max_seconds=r["wait_max"],
        evictions=r["evictions"] or 0,
    )
