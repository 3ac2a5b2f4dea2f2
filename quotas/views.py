"""Pages of the quota app."""

from itertools import groupby

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from quotas.kube.status import cluster_sync_status
from quotas.models import TeamMembership
from quotas.roles import sees_everything
from quotas.selectors import (
    allocations_visible_to,
    capacity_summary,
    plan_findings,
    teams_visible_to,
)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The user's teams and their current allocations; admins also see capacity per cluster."""
    user = request.user
    teams = teams_visible_to(user).select_related("parent").order_by("slug")
    roles = dict(TeamMembership.objects.filter(user=user).values_list("team_id", "role"))
    allocations = allocations_visible_to(user).order_by(
        "team_namespace__team__slug",
        "team_namespace__cluster__name",
        "team_namespace__name",
        "resource__name",
    )
    by_team = {
        team_id: list(rows)
        for team_id, rows in groupby(allocations, key=lambda a: a.team_namespace.team_id)
    }
    team_rows = [
        {"team": team, "role": roles.get(team.id), "allocations": by_team.get(team.id, [])}
        for team in teams
    ]
    context = {
        "team_rows": team_rows,
        "sees_everything": sees_everything(user),
        "capacity": capacity_summary() if sees_everything(user) else [],
        "clusters": cluster_sync_status() if sees_everything(user) else [],
        "violations": plan_findings() if sees_everything(user) else [],
    }
    return render(request, "quotas/home.html", context)
