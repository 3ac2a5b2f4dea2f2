"""Showback: per team and month, the GPU-hours its namespaces used over every cluster, those
its guarantee held, those borrowed above it and those of the guarantee left idle, with their
cost where a cluster has a GPU-hour price.

Read from the daily rollups (usage/rollup.py): ``gpu_hours`` is what was allocated, times the
time it was; ``borrowed`` what was above the guarantee in force; ``idle`` what of the guarantee
was not allocated. So the guarantee's hours are used - borrowed + idle, over the time samples
were taken. Unit-hours become GPU-hours as quotas.budgets counts a unit (a whole GPU is one, a
MIG slice its share of a card); other resources (vGPU shares, CPU) are not GPU-hours and are
left out.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from fractions import Fraction

from django.conf import settings
from django.db.models import Sum
from django.db.models.functions import TruncMonth
from django.utils import timezone
from django.utils.translation import gettext as _

from common.amounts import money, rounded
from common.dates import parse_month
from common.errors import ValidationFailed
from quotas.budgets import gpus_per_unit
from quotas.models import Cluster, Team
from quotas.roles import AnyUser, sees_everything
from quotas.selectors import team_ids_of
from usage.models import UsageDaily

# At most two years in one answer (24 months × teams rows).
MAX_MONTHS = 24
DEFAULT_MONTHS = 6


def hours_figure(value: Fraction | Decimal | int) -> Decimal:
    """GPU-hours as shown: one decimal, half up."""
    return rounded(value, "0.1")


def _months_between(start: date, end: date) -> int:
    return (end.year - start.year) * 12 + end.month - start.month + 1


def add_months(month: date, n: int) -> date:
    index = month.year * 12 + month.month - 1 + n
    return date(index // 12, index % 12 + 1, 1)


@dataclass
class ShowbackPeriod:
    """The months asked for (first days), one cluster or all, one team or all visible."""

    start: date
    end: date
    cluster: Cluster | None = None
    team: Team | None = None

    @property
    def months(self) -> list[date]:
        return [add_months(self.start, i) for i in range(_months_between(self.start, self.end))]

    @property
    def last_day(self) -> date:
        return add_months(self.end, 1) - timedelta(days=1)


def showback_period(user: AnyUser, params) -> ShowbackPeriod:
    """``start`` and ``end`` as YYYY-MM (default: the last six months, this one included),
    ``cluster`` by name and ``team`` by slug (optional; a team the user may see); a bad value
    is a ValidationFailed naming its field."""
    this_month = timezone.localdate().replace(day=1)
    months = {}
    for key, default in (("start", add_months(this_month, 1 - DEFAULT_MONTHS)), ("end", None)):
        text = params.get(key) or ""  # only absent or empty takes the default
        months[key] = parse_month(text, field=key) if text else default
    if months["end"] is None:
        months["end"] = max(this_month, months["start"])
    if months["end"] < months["start"]:
        raise ValidationFailed(_("end: must not be before start"), field="end")
    if _months_between(months["start"], months["end"]) > MAX_MONTHS:
        raise ValidationFailed(
            _("end: a period is at most %(months)s months") % {"months": MAX_MONTHS},
            field="end",
        )
    period = ShowbackPeriod(start=months["start"], end=months["end"])
    if name := (params.get("cluster") or "").strip():
        period.cluster = Cluster.objects.filter(name=name).first()
        if period.cluster is None:
            raise ValidationFailed(
                _("cluster: no cluster named %(name)s") % {"name": repr(name)}, field="cluster"
            )
    if slug := (params.get("team") or "").strip():
        visible = None if sees_everything(user) else team_ids_of(user)
        team = Team.objects.filter(slug=slug).first()
        if team is None or (visible is not None and team.pk not in visible):
            raise ValidationFailed(
                _("team: no team %(team)s among the teams you may see") % {"team": repr(slug)},
                field="team",
            )
        period.team = team
    return period


@dataclass
class Hours:
    """GPU-hours of a team (or of several) in a month, and their cost on priced clusters."""

    used: Fraction = Fraction(0)
    borrowed: Fraction = Fraction(0)
    idle: Fraction = Fraction(0)
    used_cost: Fraction = Fraction(0)
    guaranteed_cost: Fraction = Fraction(0)
    idle_cost: Fraction = Fraction(0)
    unpriced: Fraction = Fraction(0)  # GPU-hours used on clusters without a price
    priced: bool = False  # some of them are on a cluster with a price

    @property
    def guaranteed(self) -> Fraction:
        return self.used - self.borrowed + self.idle

    def add(self, other: Hours) -> None:
        for name in ("used", "borrowed", "idle", "used_cost", "guaranteed_cost", "idle_cost"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.unpriced += other.unpriced
        self.priced = self.priced or other.priced


@dataclass
class ShowbackRow:
    """One month of one team, of the other teams together (team None, ``others``), or of
    every team (team None): figures as shown and answered."""

    month: date
    team: str | None
    hours: Hours
    others: bool = False

    @property
    def scope(self) -> str:
        return "team" if self.team else ("others" if self.others else "total")

    used = property(lambda self: hours_figure(self.hours.used))
    guaranteed = property(lambda self: hours_figure(self.hours.guaranteed))
    borrowed = property(lambda self: hours_figure(self.hours.borrowed))
    idle = property(lambda self: hours_figure(self.hours.idle))
    unpriced = property(lambda self: hours_figure(self.hours.unpriced))

    @property
    def idle_percent(self) -> int | None:
        """The share of the guarantee's hours left idle."""
        guaranteed = self.hours.guaranteed
        return round(self.hours.idle / guaranteed * 100) if guaranteed > 0 else None

    def _cost(self, value: Fraction) -> Decimal | None:
        return money(value) if self.hours.priced else None

    used_cost = property(lambda self: self._cost(self.hours.used_cost))
    guaranteed_cost = property(lambda self: self._cost(self.hours.guaranteed_cost))
    idle_cost = property(lambda self: self._cost(self.hours.idle_cost))


@dataclass
class Showback:
    period: ShowbackPeriod
    rows: list[ShowbackRow]  # per month: each team shown, then the others, then the total
    currency: str = field(default_factory=lambda: settings.QUOTA_CURRENCY)

    @property
    def teams(self) -> list[ShowbackRow]:
        return [r for r in self.rows if r.scope == "team"]

    @property
    def totals(self) -> list[ShowbackRow]:
        return [r for r in self.rows if r.scope == "total"]

    @property
    def priced(self) -> bool:
        return any(r.hours.priced for r in self.rows)


def _hours_by_team_month(period: ShowbackPeriod) -> dict[tuple[date, int], Hours]:
    """Per (month, team id), its GPU-hours: one grouped query."""
    days = UsageDaily.objects.filter(day__gte=period.start, day__lte=period.last_day)
    if period.cluster is not None:
        days = days.filter(team_namespace__cluster=period.cluster)
    out: dict[tuple[date, int], Hours] = defaultdict(Hours)
    for month, team_id, kind, name, gpu_model, price, used, borrowed, idle in (
        days.order_by()
        .annotate(month=TruncMonth("day"))
        .values_list(
            "month",
            "team_namespace__team_id",
            "resource__kind",
            "resource__name",
            "resource__gpu_model",
            "team_namespace__cluster__gpu_hour_price",
        )
        .annotate(
            u=Sum("gpu_hours"), b=Sum("borrowed_gpu_hours"), i=Sum("idle_guaranteed_gpu_hours")
        )
    ):
        per_unit = gpus_per_unit(kind=kind, name=name, gpu_model=gpu_model)
        if per_unit is None:
            continue
        if hasattr(month, "date"):  # a datetime on some databases
            month = month.date()
        hours = out[(month.replace(day=1), team_id)]
        u, b, i = (Fraction(v or 0) * per_unit for v in (used, borrowed, idle))
        hours.used += u
        hours.borrowed += b
        hours.idle += i
        if price is None:
            hours.unpriced += u
        else:
            hours.priced = True
            hours.used_cost += u * Fraction(price)
            hours.guaranteed_cost += (u - b + i) * Fraction(price)
            hours.idle_cost += i * Fraction(price)
    return dict(out)


def showback(*, user: AnyUser, period: ShowbackPeriod) -> Showback:
    """Per month of the period: a row per team the user may see (or the one asked for) with
    usage, then (for a lead or member, or with one team asked for) the other teams together,
    then every team's total. Months without usage have no team rows but a total of zero."""
    visible = None if sees_everything(user) else team_ids_of(user)
    slugs = dict(Team.objects.values_list("id", "slug"))
    shown = {
        pk
        for pk in slugs
        if (visible is None or pk in visible) and (period.team is None or pk == period.team.pk)
    }
    by_month: dict[date, list[tuple[int, Hours]]] = defaultdict(list)
    for (month, team_id), team_hours in _hours_by_team_month(period).items():
        if team_id in slugs:
            by_month[month].append((team_id, team_hours))
    rows: list[ShowbackRow] = []
    for month in period.months:
        others, total = Hours(), Hours()
        for team_id, team_hours in sorted(by_month[month], key=lambda item: slugs[item[0]]):
            total.add(team_hours)
            if team_id in shown:
                rows.append(ShowbackRow(month=month, team=slugs[team_id], hours=team_hours))
            else:
                others.add(team_hours)
        if len(shown) < len(slugs) and others.used + others.idle > 0:
            rows.append(ShowbackRow(month=month, team=None, hours=others, others=True))
        rows.append(ShowbackRow(month=month, team=None, hours=total))
    return Showback(period=period, rows=rows)


# The CSV's and the API's columns, one row a month of a team, of the others or the total.
EXPORT_COLUMNS = (
    "month",
    "scope",
    "team",
    "gpu_hours_used",
    "gpu_hours_guaranteed",
    "gpu_hours_borrowed",
    "gpu_hours_idle",
    "idle_percent",
    "gpu_hours_unpriced",
    "currency",
    "cost_used",
    "cost_guaranteed",
    "cost_idle",
)


def export_values(row: ShowbackRow, currency: str) -> dict:
    """One row under EXPORT_COLUMNS (amounts as Decimals, none as None)."""
    return {
        "month": f"{row.month:%Y-%m}",
        "scope": row.scope,
        "team": row.team,
        "gpu_hours_used": row.used,
        "gpu_hours_guaranteed": row.guaranteed,
        "gpu_hours_borrowed": row.borrowed,
        "gpu_hours_idle": row.idle,
        "idle_percent": row.idle_percent,
        "gpu_hours_unpriced": row.unpriced,
        "currency": currency if row.hours.priced else None,
        "cost_used": row.used_cost,
        "cost_guaranteed": row.guaranteed_cost,
        "cost_idle": row.idle_cost,
    }
