"""The team dashboard at ``/``: for each of the user's teams (admins and auditors: every team,
a page at a time, ``?team=<slug>`` for one) its allocations with the newest usage, a chart of
its usage against guarantee and cap, its requests, temporary grants and open suggestions.

A fixed number of queries, however many teams, allocations, days or requests there are."""

from dataclasses import replace
from datetime import datetime, timedelta

from django.contrib.auth.decorators import login_required
from django.core.paginator import Page, Paginator
from django.db.models import F
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html_join
from django.utils.text import slugify
from django.utils.timesince import timeuntil
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from approvals.cap_notices import near_cap
from approvals.models import QuotaRequest
from common.amounts import unit_label
from common.choices import choice_labels
from common.palette import team_colour, team_colours
from common.sections import jinja_section
from overview.charts import team_usage_figure
from overview.dashboard import (
    active_temporary_grants,
    open_suggestions,
    run_time_limits,
    team_requests,
)
from overview.selectors import allocations_now, amount_cell, team_usage_series
from quotas.models import Team, TeamMembership, TeamNamespace
from quotas.roles import sees_everything
from quotas.selectors import team_scope
from usage.models import Suggestion

TEAMS_PER_PAGE = 10
CHART_DAYS = 30


def _chart_labels() -> dict[str, str]:
    return {
        "peak": _("daily peak used"),
        "mean": _("daily mean used"),
        "guarantee": _("guarantee"),
        "cap": _("cap"),
    }


def _minute(moment: datetime) -> str:
    """A moment as the page writes it (``|date:"Y-m-d H:i"``, in the current time zone)."""
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M")


_POINT_ROW = (
    '<tr><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td>'
    '<td class="num">{}</td></tr>'
)


def _charts_by_team(team_ids: list[int], slugs: dict[int, str]) -> dict[int, list[dict]]:
    """Per team (``slugs``: id to slug), its charts, each team in its colour of every page."""
    today = timezone.localdate()
    labels = _chart_labels()
    colours = team_colours(Team.objects.values_list("slug", flat=True))
    charts: dict[int, list[dict]] = {}
    for series in team_usage_series(
        team_ids=team_ids, start=today - timedelta(days=CHART_DAYS - 1), end=today
    ):
        title = _("%(resource)s on %(cluster)s: used against guarantee and cap") % {
            "resource": series.resource,
            "cluster": series.cluster,
        }
        team_charts = charts.setdefault(series.team_id, [])
        team_charts.append(
            {
                "id": f"team-chart-{series.team_id}-{len(team_charts)}",
                "title": title,
                # The chart's figures as the rows of its table, escaped as the template would:
                # thirty days of five cells are cheaper written here than by template tags.
                "points_html": format_html_join(
                    "",
                    _POINT_ROW,
                    (
                        (day.isoformat(), *map(amount_cell, amounts))
                        for day, *amounts in zip(
                            series.days,
                            series.peak,
                            series.mean,
                            series.guarantee,
                            series.cap,
                            strict=True,
                        )
                    ),
                ),
                "figure": team_usage_figure(
                    replace(series, unit=unit_label(series.unit)),
                    title=title,
                    labels=labels,
                    colour=team_colour(colours, slugs.get(series.team_id)),
                ),
            }
        )
    return charts


def _allocation_rows(team_ids: list[int]) -> dict[int, list[dict]]:
    """Per team, its allocations with their newest usage, each cell as the page writes it."""
    workload = choice_labels(TeamNamespace, "workload_class")
    out: dict[int, list[dict]] = {}
    for now in allocations_now(team_ids=team_ids):
        a = now.allocation
        workload_class = a["team_namespace__workload_class"]
        out.setdefault(a["team_namespace__team_id"], []).append(
            {
                "key": f"{a['team_namespace__name']}-{slugify(a['resource__name'])}",
                "cluster": a["team_namespace__cluster__name"],
                "namespace": a["team_namespace__name"],
                "workload": workload.get(workload_class, workload_class),
                "resource": a["resource__name"],
                "resource_display_name": a["resource__display_name"],
                "guarantee": amount_cell(a["guarantee"]),
                "cap": amount_cell(a["cap"]),
                "per_pod_max": amount_cell(a["per_pod_max"]),
                "priority_classes": ", ".join(map(str, a["priority_classes"] or ())),
                "used": None if now.used is None else amount_cell(now.used),
                "used_at": _minute(now.used_at) if now.used_at else "",
                "used_day": now.used_day.isoformat() if now.used_day else "",
                "borrowed": amount_cell(now.borrowed),
                "borrowing": bool(now.borrowed),
                "near_cap": near_cap(now.used, a["cap"]),
            }
        )
    return out


def _request_lists(requests: dict, status_labels: dict[str, str]) -> list[dict]:
    """The team's requests on their way, then its recent ones, each line as the page writes
    it."""
    lists = []
    for which in ("pending", "recent"):
        rows = [
            {
                "id": r["id"],
                "url": reverse("requests-detail", args=[r["id"]]),
                "status": r["status"],
                "status_label": status_labels.get(r["status"], r["status"]),
                "temporary": r["kind"] == QuotaRequest.Kind.TEMPORARY,
                "who": r["requested_by__username"],
                "when": _minute(r["updated_at"]),
            }
            for r in requests[which]
        ]
        total = requests[f"{which}_count"]
        lists.append(
            {
                "which": which,
                "requests": rows,
                "total": total,
                "more": total > len(rows),
                "more_text": ngettext(
                    "%(total)s in all: see the team's requests",
                    "%(total)s in all: see the team's requests",
                    total,
                )
                % {"total": total},
            }
        )
    return lists


def _grant_rows(grants: list[dict]) -> list[dict]:
    return [
        {
            "id": grant["id"],
            "url": reverse("requests-detail", args=[grant["id"]]),
            "end": _minute(grant["ends_at"]),
            "left": timeuntil(grant["ends_at"]),
            "lines": [
                {
                    "namespace": line["namespace"],
                    "resource": line["resource"],
                    "guarantee": amount_cell(line["guarantee"]),
                    "cap": amount_cell(line["cap"]),
                }
                for line in grant["lines"]
            ],
        }
        for grant in grants
    ]


def _suggestion_rows(suggestions: list[dict], confidence: dict[str, str]) -> list[dict]:
    return [
        {
            "month": s["month"].strftime("%Y-%m"),
            "cluster": s["cluster__name"],
            "namespace": s["team_namespace__name"],
            "resource": s["resource__name"],
            "current_guarantee": amount_cell(s["current_guarantee"]),
            "suggested_guarantee": amount_cell(s["suggested_guarantee"]),
            "current_cap": amount_cell(s["current_cap"]),
            "suggested_cap": amount_cell(s["suggested_cap"]),
            "confidence": confidence.get(s["confidence"], s["confidence"]),
        }
        for s in suggestions
    ]


def _team_page(request: HttpRequest, visible) -> tuple[Page, str, list[str]]:
    """The page of teams asked for (each a row: id, slug, name, parent_id, parent_name), the
    slug asked for and the slugs of every team the user may see; a team the user may not see
    is a 404, as if unknown. One query."""
    teams = list(
        visible.order_by("slug").values(
            "id", "slug", "name", "parent_id", parent_name=F("parent__name")
        )
    )
    slugs = [team["slug"] for team in teams]
    slug = request.GET.get("team", "").strip()
    if slug:
        teams = [team for team in teams if team["slug"] == slug]
    page = Paginator(teams, TEAMS_PER_PAGE).get_page(request.GET.get("page"))
    if slug and not page.object_list:
        raise Http404(_("No team %(slug)s among the teams you may see.") % {"slug": slug})
    return page, slug, slugs


@login_required
def home(request: HttpRequest) -> HttpResponse:
    context = _home_context(request)
    # The teams' sections are the page's heaviest part.
    context["dashboard"] = jinja_section(request, "overview/_home.html", context)
    return render(request, "overview/home.html", context)


def _home_context(request: HttpRequest) -> dict:
    user = request.user
    # The user's teams and memberships, read once for this request.
    scope = team_scope(user)
    page, slug, slugs = _team_page(request, scope.teams_visible())
    teams = list(page.object_list)
    ids = [team["id"] for team in teams]
    everything = sees_everything(user)
    roles = scope.roles
    if roles is None:  # not read for platform admins: they see every team anyway
        roles = dict(
            TeamMembership.objects.filter(user=user).order_by().values_list("team_id", "role")
        )
    # The rule request_create applies (may_request_for), for every team of the page at once.
    led = set(ids) if scope.requestable_ids is None else scope.requestable_ids
    allocations = _allocation_rows(ids)
    run_times = run_time_limits(team_ids=ids)
    charts = _charts_by_team(ids, {team["id"]: team["slug"] for team in teams})
    requests = team_requests(team_ids=ids)
    grants = active_temporary_grants(team_ids=ids)
    suggestions = open_suggestions(team_ids=ids)
    status_labels = choice_labels(QuotaRequest, "status")
    confidence = choice_labels(Suggestion, "confidence")
    team_rows = [
        {
            "team": team,
            "role": roles.get(team["id"]),
            "may_request": team["id"] in led,
            "allocations": allocations.get(team["id"], []),
            "run_times": run_times.get(team["id"], []),
            "charts": charts.get(team["id"], []),
            "request_lists": _request_lists(requests[team["id"]], status_labels),
            "grants": _grant_rows(grants.get(team["id"], [])),
            "suggestions": _suggestion_rows(suggestions.get(team["id"], []), confidence),
        }
        for team in teams
    ]
    context = {
        "team_rows": team_rows,
        "page": page,
        "selected_team": slug,
        "team_choices": slugs,
        "sees_everything": everything,
        "chart_data": [
            {"id": chart["id"], "figure": chart["figure"]}
            for row in team_rows
            for chart in row["charts"]
        ],
        "chart_days": CHART_DAYS,
    }
    return context
