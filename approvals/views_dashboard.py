"""The team dashboard at ``/``: for each of the user's teams (admins and auditors: every team,
a page at a time, ``?team=<slug>`` for one) its allocations with the newest usage, a chart of
its usage against guarantee and cap, its requests, temporary grants and open suggestions.

A fixed number of queries, however many teams, allocations, days or requests there are."""

from datetime import timedelta

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext as _

from approvals.dashboard import active_temporary_grants, open_suggestions, team_requests
from quotas.models import TeamMembership
from quotas.overview import allocations_now, team_usage_series
from quotas.overview_charts import team_usage_figure
from quotas.roles import is_platform_admin, sees_everything
from quotas.selectors import team_ids_of, teams_visible_to

TEAMS_PER_PAGE = 10
CHART_DAYS = 30


def _chart_labels() -> dict[str, str]:
    return {
        "peak": _("daily peak used"),
        "mean": _("daily mean used"),
        "guarantee": _("guarantee"),
        "cap": _("cap"),
    }


def _charts_by_team(team_ids: list[int]) -> dict[int, list[dict]]:
    today = timezone.localdate()
    labels = _chart_labels()
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
                "series": series,
                "points": list(
                    zip(
                        series.days,
                        series.peak,
                        series.mean,
                        series.guarantee,
                        series.cap,
                        strict=True,
                    )
                ),
                "figure": team_usage_figure(series, title=title, labels=labels),
            }
        )
    return charts


def _team_page(request: HttpRequest, visible):
    """The page of teams asked for; a team the user may not see is a 404, as if unknown."""
    teams = visible.select_related("parent").order_by("slug")
    slug = request.GET.get("team", "").strip()
    if slug:
        teams = teams.filter(slug=slug)
    page = Paginator(teams, TEAMS_PER_PAGE).get_page(request.GET.get("page"))
    if slug and not page.object_list:
        raise Http404(_("No team %(slug)s among the teams you may see.") % {"slug": slug})
    return page, slug


@login_required
def home(request: HttpRequest) -> HttpResponse:
    user = request.user
    visible = teams_visible_to(user)
    page, slug = _team_page(request, visible)
    teams = list(page.object_list)
    ids = [t.pk for t in teams]
    everything = sees_everything(user)
    roles = dict(TeamMembership.objects.filter(user=user).values_list("team_id", "role"))
    # The rule request_create applies (may_request_for), for every team of the page at once.
    led = set(ids) if is_platform_admin(user) else team_ids_of(user, roles=("lead",))
    allocations: dict[int, list] = {}
    for row in allocations_now(team_ids=ids):
        allocations.setdefault(row.allocation.team_namespace.team_id, []).append(row)
    charts = _charts_by_team(ids)
    requests = team_requests(team_ids=ids)
    grants = active_temporary_grants(team_ids=ids)
    suggestions = open_suggestions(team_ids=ids)
    team_rows = [
        {
            "team": team,
            "role": roles.get(team.pk),
            "may_request": team.pk in led,
            "allocations": allocations.get(team.pk, []),
            "charts": charts.get(team.pk, []),
            "requests": requests[team.pk],
            "grants": grants.get(team.pk, []),
            "suggestions": suggestions.get(team.pk, []),
        }
        for team in teams
    ]
    context = {
        "team_rows": team_rows,
        "page": page,
        "selected_team": slug,
        "team_choices": list(visible.order_by("slug").values_list("slug", flat=True)),
        "sees_everything": everything,
        "chart_data": [
            {"id": chart["id"], "figure": chart["figure"]}
            for row in team_rows
            for chart in row["charts"]
        ],
        "chart_days": CHART_DAYS,
    }
    return render(request, "quotas/home.html", context)
