"""The team dashboard at ``/``: for each of the user's teams (admins and auditors: every team,
a page at a time, ``?team=<slug>`` for one) its allocations with the newest usage, a chart of
its usage against guarantee and cap, its requests, temporary grants and open suggestions.

A fixed number of queries, however many teams, allocations, days or requests there are."""

from datetime import datetime, timedelta

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.text import slugify
from django.utils.timesince import timeuntil
from django.utils.translation import gettext as _

from approvals.dashboard import active_temporary_grants, open_suggestions, team_requests
from approvals.models import QuotaRequest
from quotas.models import Suggestion, TeamMembership, TeamNamespace
from quotas.overview import allocations_now, amount_cell, team_usage_series
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


def _minute(moment: datetime) -> str:
    """A moment as the page writes it (``|date:"Y-m-d H:i"``, in the current time zone)."""
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M")


def _labels(model, field: str) -> dict[str, str]:
    """The translated label of each choice of a field, read once for the page."""
    return {value: str(label) for value, label in model._meta.get_field(field).flatchoices}


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
                "points": [
                    (day.isoformat(), *map(amount_cell, amounts))
                    for day, *amounts in zip(
                        series.days,
                        series.peak,
                        series.mean,
                        series.guarantee,
                        series.cap,
                        strict=True,
                    )
                ],
                "figure": team_usage_figure(series, title=title, labels=labels),
            }
        )
    return charts


def _allocation_rows(team_ids: list[int]) -> dict[int, list[dict]]:
    """Per team, its allocations with their newest usage, each cell as the page writes it."""
    workload = _labels(TeamNamespace, "workload_class")
    out: dict[int, list[dict]] = {}
    for now in allocations_now(team_ids=team_ids):
        a = now.allocation
        out.setdefault(a["team_id"], []).append(
            {
                "key": f"{a['namespace']}-{slugify(a['resource_name'])}",
                "cluster": a["cluster"],
                "namespace": a["namespace"],
                "workload": workload.get(a["workload_class"], a["workload_class"]),
                "resource": a["resource_name"],
                "resource_display_name": a["resource_display_name"],
                "guarantee": amount_cell(a["guarantee"]),
                "cap": amount_cell(a["cap"]),
                "per_pod_max": amount_cell(a["per_pod_max"]),
                "priority_classes": ", ".join(a["priority_classes"] or ()),
                "used": None if now.used is None else amount_cell(now.used),
                "used_at": _minute(now.used_at) if now.used_at else "",
                "used_day": now.used_day.isoformat() if now.used_day else "",
                "borrowed": amount_cell(now.borrowed),
                "borrowing": bool(now.borrowed),
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
        lists.append({"which": which, "requests": rows, "total": total, "more": total > len(rows)})
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
                    "resource": line["resource_name"],
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
            "cluster": s["cluster_name"],
            "namespace": s["namespace"],
            "resource": s["resource_name"],
            "current_guarantee": amount_cell(s["current_guarantee"]),
            "suggested_guarantee": amount_cell(s["suggested_guarantee"]),
            "current_cap": amount_cell(s["current_cap"]),
            "suggested_cap": amount_cell(s["suggested_cap"]),
            "confidence": confidence.get(s["confidence"], s["confidence"]),
        }
        for s in suggestions
    ]


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
    allocations = _allocation_rows(ids)
    charts = _charts_by_team(ids)
    requests = team_requests(team_ids=ids)
    grants = active_temporary_grants(team_ids=ids)
    suggestions = open_suggestions(team_ids=ids)
    status_labels = _labels(QuotaRequest, "status")
    confidence = _labels(Suggestion, "confidence")
    team_rows = [
        {
            "team": team,
            "role": roles.get(team.pk),
            "may_request": team.pk in led,
            "allocations": allocations.get(team.pk, []),
            "charts": charts.get(team.pk, []),
            "request_lists": _request_lists(requests[team.pk], status_labels),
            "grants": _grant_rows(grants.get(team.pk, [])),
            "suggestions": _suggestion_rows(suggestions.get(team.pk, []), confidence),
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
