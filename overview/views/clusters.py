"""The cluster overview (``/clusters/``, ``/clusters/<name>/``). The cross-cluster summary is
in summary.py, the team dashboard at ``/`` in home.py.

Everybody signed in sees capacity and totals; a lead or member sees the other teams only as one
aggregate, and the details of syncs and drift are for admins and auditors. Each page issues a
fixed number of queries, however many clusters, teams or allocations there are.
"""

from collections import defaultdict
from decimal import ROUND_FLOOR
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.text import slugify
from django.utils.translation import gettext as _

from common.amounts import format_amount, unit_label
from common.palette import team_colours
from common.sections import jinja_section
from overview.charts import capacity_figure, chart_segments
from overview.selectors import (
    ClusterLines,
    ResourceLine,
    amount_cell,
    capacity_by_team,
    findings_visible_to,
)
from quotas.kube.status import cluster_sync_status, open_sync_requests, recent_drift
from quotas.mig_display import layout_cells
from quotas.models import Allocation, Cluster, ClusterCapacity, Team
from quotas.roles import sees_everything
from quotas.rules import RULE_CAP_LE_SHARE, Finding
from quotas.selectors import (
    mig_layouts,
    plan_findings_of,
    teams_requestable_by,
    top_priority_use,
)


def finding_rows(user, findings: list[Finding], capacities: list[ClusterCapacity]) -> list[dict]:
    """Each finding of the plan, with why its rule matters and, for a cap above the cluster's
    share, a request form already holding the cap within it for whoever may ask for that
    team (one query: the allocations concerned, of the teams the user may ask for)."""
    over_share = [f for f in findings if f.rule == RULE_CAP_LE_SHARE and f.namespace]
    allocations = {}
    if over_share:
        rows = Allocation.objects.filter(
            team_namespace__cluster__name__in={f.cluster for f in over_share},
            team_namespace__name__in={f.namespace for f in over_share},
            resource__name__in={f.resource for f in over_share},
            team_namespace__team__in=teams_requestable_by(user),
        ).select_related("team_namespace__cluster", "resource")
        allocations = {
            (a.team_namespace.cluster.name, a.team_namespace.name, a.resource.name): a for a in rows
        }
    capacity = {(c.cluster_id, c.resource_id): c.capacity for c in capacities}
    out = []
    for f in findings:
        row = {"finding": f, "why": None, "fix_url": None, "fix_label": None}
        if f.rule == RULE_CAP_LE_SHARE:
            row["why"] = _(
                "Why it matters: a cap above the cluster's share lets one namespace hold more "
                "than that share of the cluster whenever the others are idle, and the others "
                "wait while it gives it back."
            )
        a = allocations.get((f.cluster, f.namespace, f.resource))
        if a is not None:
            cluster = a.team_namespace.cluster
            total = capacity.get((cluster.pk, a.resource_id))
            if total:
                within = cluster.effective_max_cap_share * total
                if a.resource.whole_units:
                    within = within.to_integral_value(rounding=ROUND_FLOOR)
                values = {
                    "team": a.team_namespace.team_id,
                    "namespace": a.team_namespace_id,
                    "resource": a.resource_id,
                    "guarantee": format_amount(min(a.guarantee, within)),
                    "cap": format_amount(within),
                }
                row["fix_url"] = f"{reverse('requests-new')}?{urlencode(values)}"
                row["fix_label"] = _("Ask for cap %(cap)s instead") % {"cap": values["cap"]}
        out.append(row)
    return out


def _capacity_chart(block: ClusterLines, index: int, line, colours: dict[str, str]) -> dict:
    unit = unit_label(line.unit)
    title = _("%(resource)s on %(cluster)s: guarantees and caps against capacity") % {
        "resource": line.resource,
        "cluster": line.cluster,
    }
    labels = {
        "guarantees": _("sum of guarantees"),
        "caps": _("sum of caps"),
        "capacity": _("capacity %(amount)s %(unit)s")
        % {"amount": format_amount(line.capacity or 0), "unit": unit},
    }
    segments = chart_segments(line.shares, rest_label=_("smaller teams"))
    return {
        "id": f"cluster-chart-{block.cluster.pk}-{index}",
        "title": title,
        "figure": capacity_figure(
            title=title,
            unit=unit,
            capacity=line.capacity,
            segments=segments,
            labels=labels,
            colours=colours,
        ),
    }


def _line_cells(line: ResourceLine, chart: dict) -> dict:
    """A resource line of a cluster with its chart, each amount as the page writes it."""
    return {
        "line": line,
        "chart": chart,
        "slug": slugify(line.resource),
        "capacity": amount_cell(line.capacity),
        "guaranteed": amount_cell(line.guaranteed),
        "free_guarantee": amount_cell(line.free_guarantee),
        "capped": amount_cell(line.capped),
        # The teams' shares, then the other teams' together (the last share, if any).
        "shares": [
            (share.label, amount_cell(share.guarantee), amount_cell(share.cap))
            for share in line.shares
            if not share.is_others
        ],
        "others": [
            (share.label, amount_cell(share.guarantee), amount_cell(share.cap))
            for share in line.shares
            if share.is_others
        ],
    }


def _top_priority_cells(use) -> dict:
    """One resource's guarantee at the highest priority class against the cluster's limit."""
    return {
        "use": use,
        "text": _(
            "%(resource)s: %(guaranteed)s of %(capacity)s guaranteed to namespaces allowed "
            "%(classes)s (%(used)s%%; at most %(share)s%%, %(limit)s)"
        )
        % {
            "resource": use.resource,
            "guaranteed": format_amount(use.guaranteed),
            "capacity": format_amount(use.capacity),
            "classes": ", ".join(use.classes),
            "used": format_amount(round(use.used_share * 100, 1)),
            "share": format_amount(use.share * 100),
            "limit": format_amount(use.limit),
        },
    }


def _cluster_context(request: HttpRequest, clusters: QuerySet[Cluster]) -> dict:
    user = request.user
    everything = sees_everything(user)
    # The clusters are read once, with their sync status, and their capacities once: the
    # capacity lines and the rule violations both start from them.
    sync_rows = cluster_sync_status(clusters=clusters)
    sync = {row.cluster.pk: row for row in sync_rows}
    cluster_list = [row.cluster for row in sync_rows]
    ids = [cluster.pk for cluster in cluster_list]
    capacities = list(
        ClusterCapacity.objects.filter(cluster_id__in=ids)
        .select_related("resource")
        .order_by("resource__name")
    )
    overview = capacity_by_team(
        user=user, clusters=cluster_list, capacities=capacities, others_label=_("Other teams")
    )
    findings = defaultdict(list)
    for row in finding_rows(
        user, findings_visible_to(user, plan_findings_of(cluster_list, capacities)), capacities
    ):
        findings[row["finding"].cluster].append(row)
    top_priority = top_priority_use(cluster_list, capacities)
    blocks, chart_data = [], []
    colours = team_colours(Team.objects.values_list("slug", flat=True))
    for block in overview:
        charts = [_capacity_chart(block, i, line, colours) for i, line in enumerate(block.lines)]
        chart_data += [{"id": c["id"], "figure": c["figure"]} for c in charts]
        blocks.append(
            {
                "cluster": block.cluster,
                "url": reverse("cluster-detail", args=[block.cluster.name]),
                "lines": [
                    _line_cells(line, chart)
                    for line, chart in zip(block.lines, charts, strict=True)
                ],
                "over_promised": block.over_promised,
                "findings": findings.get(block.cluster.name, []),
                "mig_layouts": [
                    layout_cells(plan)
                    for plan in mig_layouts(
                        block.cluster,
                        {line.resource: line.guaranteed for line in block.lines},
                        [c.resource for c in capacities if c.cluster_id == block.cluster.pk],
                    )
                ],
                "top_priority": [
                    _top_priority_cells(use) for use in top_priority.get(block.cluster.name, [])
                ],
                "sync": sync.get(block.cluster.pk),
            }
        )
    return {
        "blocks": blocks,
        "chart_data": chart_data,
        "sees_everything": everything,
        "cluster_ids": ids,
        "currency": settings.QUOTA_CURRENCY,
    }


def _page(request: HttpRequest, context: dict) -> HttpResponse:
    """The overview of one cluster or all: its sections are the page's heaviest part."""
    context = {"cluster": None, "drift": [], "open_syncs": [], **context}
    context["sections"] = jinja_section(request, "overview/_clusters.html", context)
    return render(request, "overview/clusters.html", context)


@login_required
def cluster_list(request: HttpRequest) -> HttpResponse:
    context = _cluster_context(request, Cluster.objects.all())
    if sees_everything(request.user):
        context["drift"] = recent_drift(limit=10)
    return _page(request, context)


@login_required
def cluster_detail(request: HttpRequest, name: str) -> HttpResponse:
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        raise Http404(_("No cluster named %(name)s.") % {"name": name})
    context = _cluster_context(request, Cluster.objects.filter(pk=cluster.pk))
    context["cluster"] = cluster
    if sees_everything(request.user):
        context["drift"] = recent_drift(cluster_ids=[cluster.pk])
        context["open_syncs"] = open_sync_requests(cluster_ids=[cluster.pk])
    return _page(request, context)
