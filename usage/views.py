"""The usage page (/usage/): per cluster and per team, through the same selectors and filters
as the API. (The suggestions page, where suggestions become requests, is
approvals.views.suggestions.)"""

import itertools
from collections import defaultdict
from datetime import date, timedelta

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from common.csvstream import csv_download
from common.dates import parse_day
from common.errors import ValidationFailed
from common.palette import team_colour, team_colours
from quotas.models import AllocationVersion, Cluster, Resource, Team
from quotas.selectors import teams_visible_to
from usage.canary import canary_metrics, canary_period_check
from usage.charts import AllocationStep, showback_figures, usage_figures
from usage.models import UsageDaily
from usage.selectors import usage_daily_for
from usage.showback import EXPORT_COLUMNS as SHOWBACK_COLUMNS
from usage.showback import export_values, showback, showback_period
from usage.units import hour_labels

MAX_CHARTED = 40


def _clusters():
    return Cluster.objects.order_by("name")


def _usage_params(user, params) -> dict:
    """cluster (default: the first), team (optional), start and end (default: last 30 days)."""
    clusters = _clusters()
    name = (params.get("cluster") or "").strip()
    cluster = clusters.filter(name=name).first() if name else clusters.first()
    if name and cluster is None:
        raise ValidationFailed(
            _("cluster: no cluster named %(name)s") % {"name": repr(name)}, field="cluster"
        )
    team = None
    if slug := (params.get("team") or "").strip():
        team = teams_visible_to(user).filter(slug=slug).first()
        if team is None:
            raise ValidationFailed(
                _("team: no team %(team)s among the teams you may see") % {"team": repr(slug)},
                field="team",
            )
    today = timezone.localdate()
    dates = {}
    for key, default in (("start", today - timedelta(days=30)), ("end", today)):
        text = (params.get(key) or "").strip()
        dates[key] = parse_day(text, field=key) if text else default
    canary_period_check(dates["start"], dates["end"])
    return {"cluster": cluster, "team": team, **dates}


def _steps(pairs: set[tuple[int, int]]) -> dict[tuple[int, int], list[AllocationStep]]:
    steps: dict[tuple[int, int], list[AllocationStep]] = defaultdict(list)
    versions = AllocationVersion.objects.filter(
        allocation__team_namespace_id__in={ns for ns, _ in pairs}
    ).values_list(
        "allocation__team_namespace_id",
        "allocation__resource_id",
        "changed_at",
        "guarantee",
        "cap",
    )
    for ns_id, res_id, changed, guarantee, cap in versions.order_by("changed_at", "version"):
        when: date = timezone.localtime(changed).date()
        steps[(ns_id, res_id)].append(AllocationStep(when, guarantee, cap))
    return steps


def _canary_blocks(user, cluster: Cluster, p: dict) -> list[dict]:
    """The canary metrics of each resource used on the cluster in the period, labelled by what
    its hours count (GPU-hours, slice-hours): hours of different resources never add up."""
    used = UsageDaily.objects.filter(
        team_namespace__cluster=cluster, day__gte=p["start"], day__lte=p["end"]
    ).values("resource_id")
    blocks = []
    for resource in Resource.objects.filter(pk__in=used).order_by("name"):
        rows = canary_metrics(
            user=user,
            cluster=cluster,
            team=p["team"],
            start=p["start"],
            end=p["end"],
            resource=resource,
        )
        if rows:
            labels = hour_labels(kind=resource.kind, unit=resource.unit)
            blocks.append({"resource": resource, "labels": labels, "rows": rows})
    return blocks


# The export's columns: the rollup's own names (as the API's daily usage), one row a day of a
# namespace and resource.
EXPORT_COLUMNS = (
    "day",
    "cluster",
    "team",
    "namespace",
    "workload_class",
    "resource",
    "source",
    "samples",
    "peak",
    "p95",
    "mean",
    "utilization_mean",
    "memory_used_mean_mib",
    "gpu_hours",
    "borrowed_gpu_hours",
    "idle_guaranteed_gpu_hours",
    "guarantee",
    "pending_peak",
    "pending_wait_seconds",
    "pending_wait_mean_seconds",
    "evictions",
)


def _visible_days(user, p: dict) -> list:
    """The cluster's daily rollups in the period, of the teams the user may see (and of the
    one team asked for)."""
    if p["cluster"] is None:
        return []
    visible = set(teams_visible_to(user).values_list("slug", flat=True))
    return [
        d
        for d in usage_daily_for(cluster=p["cluster"], start=p["start"], end=p["end"])
        if d.team in visible and (p["team"] is None or d.team == p["team"].slug)
    ]


def _export_cell(value) -> str:
    return "" if value is None else str(value)


@require_GET
@login_required
def usage_export_csv(request: HttpRequest) -> HttpResponse:
    """GET /usage/export.csv?cluster=&team=&start=&end=: the page's daily rollups as CSV, with
    the page's filters and the same teams; a bad filter is a 400 naming it."""
    try:
        p = _usage_params(request.user, request.GET)
    except ValidationFailed as exc:
        return HttpResponseBadRequest(exc.message, content_type="text/plain; charset=utf-8")
    days = _visible_days(request.user, p)
    name = p["cluster"].name if p["cluster"] else "none"
    if p["team"]:
        name += f"-{p['team'].slug}"
    rows = ([_export_cell(getattr(d, column)) for column in EXPORT_COLUMNS] for d in days)
    return csv_download(
        itertools.chain([EXPORT_COLUMNS], rows),
        filename=f"usage-{name}-{p['start']:%Y%m%d}-{p['end']:%Y%m%d}.csv",
    )


@login_required
def usage_page(request: HttpRequest) -> HttpResponse:
    user = request.user
    try:
        p = _usage_params(user, request.GET)
    except ValidationFailed as exc:
        context = {"error": exc, "clusters": _clusters(), "teams": teams_visible_to(user)}
        context["selected"] = {
            k: request.GET.get(k, "") for k in ("cluster", "team", "start", "end")
        }
        return render(request, "usage/usage.html", context, status=400)
    cluster = p["cluster"]
    canary, charts, truncated = [], [], False
    if cluster is not None:
        canary = _canary_blocks(user, cluster, p)
        days = _visible_days(user, p)
        by_pair = defaultdict(list)
        for d in days:
            by_pair[(d.team_namespace_id, d.resource_id)].append(d)
        steps = _steps(set(by_pair))
        colours = team_colours(Team.objects.values_list("slug", flat=True))
        units = dict(
            Resource.objects.filter(pk__in={r for _, r in by_pair}).values_list("pk", "unit")
        )
        pairs = list(by_pair.items())
        truncated = len(pairs) > MAX_CHARTED
        for pair, rows in pairs[:MAX_CHARTED]:
            first = rows[0]
            charts.append(
                {
                    "title": f"{first.namespace} {first.resource}",
                    "figures": usage_figures(
                        title=first.namespace,
                        unit=units.get(first.resource_id, first.resource),
                        days=rows,
                        steps=steps.get(pair, []),
                        colour=team_colour(colours, first.team),
                    ),
                }
            )
    context = {
        "clusters": _clusters(),
        "teams": teams_visible_to(user).order_by("slug"),
        "cluster": cluster,
        "team": p["team"],
        "start": p["start"],
        "end": p["end"],
        "selected": {
            "cluster": cluster.name if cluster else "",
            "team": p["team"].slug if p["team"] else "",
            "start": p["start"].isoformat(),
            "end": p["end"].isoformat(),
        },
        "canary": canary,
        "charts": [{"id": f"chart-{i}", **c} for i, c in enumerate(charts)],
        "chart_data": [
            {"id": f"chart-{i}-{j}", "figure": f}
            for i, c in enumerate(charts)
            for j, f in enumerate(c["figures"])
        ],
        "truncated": truncated,
    }
    context["export_url"] = reverse("usage-export") + "?" + urlencode(context["selected"])
    return render(request, "usage/usage.html", context)


# --- showback ------------------------------------------------------------------------------


def _showback_selected(request: HttpRequest) -> dict:
    return {k: request.GET.get(k, "") for k in ("start", "end", "cluster", "team")}


@require_GET
@login_required
def showback_page(request: HttpRequest) -> HttpResponse:
    """GET /showback/?start=YYYY-MM&end=YYYY-MM&cluster=&team=: per team and month the GPU-hours
    used, guaranteed, borrowed and idle and their cost; a chart, a table and the CSV."""
    user = request.user
    context = {"clusters": _clusters(), "teams": teams_visible_to(user).order_by("slug")}
    try:
        period = showback_period(user, request.GET)
    except ValidationFailed as exc:
        context |= {"error": exc, "selected": _showback_selected(request)}
        return render(request, "usage/showback.html", context, status=400)
    result = showback(user=user, period=period)
    selected = {
        "start": f"{period.start:%Y-%m}",
        "end": f"{period.end:%Y-%m}",
        "cluster": period.cluster.name if period.cluster else "",
        "team": period.team.slug if period.team else "",
    }
    figures = showback_figures(
        months=period.months,
        rows=result.rows,
        colours=team_colours(Team.objects.values_list("slug", flat=True)),
    )
    context |= {
        "showback": result,
        "selected": selected,
        "chart_data": [{"id": f"showback-chart-{i}", "figure": f} for i, f in enumerate(figures)],
        "export_url": reverse("showback-export") + "?" + urlencode(selected),
    }
    return render(request, "usage/showback.html", context)


@require_GET
@login_required
def showback_export_csv(request: HttpRequest) -> HttpResponse:
    """GET /showback/export.csv with the page's filters: its rows as CSV (EXPORT_COLUMNS); a
    bad filter is a 400 naming it."""
    try:
        period = showback_period(request.user, request.GET)
    except ValidationFailed as exc:
        return HttpResponseBadRequest(exc.message, content_type="text/plain; charset=utf-8")
    result = showback(user=request.user, period=period)
    rows = (
        [_export_cell(export_values(row, result.currency)[c]) for c in SHOWBACK_COLUMNS]
        for row in result.rows
    )
    name = f"{period.start:%Y%m}-{period.end:%Y%m}"
    if period.cluster:
        name = f"{period.cluster.name}-{name}"
    if period.team:
        name = f"{period.team.slug}-{name}"
    return csv_download(itertools.chain([SHOWBACK_COLUMNS], rows), filename=f"showback-{name}.csv")
