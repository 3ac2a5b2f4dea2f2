"""``/waiting/<team>/``: what waits in a team's namespaces now and why (quotas.kube.waiting),
read from the clusters at the request. The team's leads and members, platform admins and
auditors may look; anyone else gets 404, as for a team that does not exist. With
``?part=list`` only the list, which the dashboard puts in its team card."""

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _

from quotas.api.waiting import waits_as_rows
from quotas.kube.live_waits import waits_of_namespaces
from quotas.selectors import namespaces_visible_to, teams_visible_to


@login_required
def team_waiting(request: HttpRequest, slug: str) -> HttpResponse:
    team = teams_visible_to(request.user).filter(slug=slug).first()
    if team is None:
        raise Http404(_("No team %(slug)s that you may see.") % {"slug": slug})
    namespaces = (
        namespaces_visible_to(request.user).filter(team=team).order_by("cluster__name", "name")
    )
    rows = [
        {
            "cluster": entry["namespace"].cluster.name,
            "namespace": entry["namespace"].name,
            "error": entry["error"],
            "waits": [
                {**row, "since_at": parse_datetime(row["since"]) if row["since"] else None}
                for row in waits_as_rows(entry)
            ],
        }
        for entry in waits_of_namespaces(namespaces)
    ]
    context = {"team": team, "rows": rows, "waiting": sum(len(r["waits"]) for r in rows)}
    if request.GET.get("part") == "list":
        return render(request, "overview/_waiting.html", context)
    return render(request, "overview/waiting.html", context)
