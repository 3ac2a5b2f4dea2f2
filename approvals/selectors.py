"""Reads of requests, scoped to who asks; previews of what a request would write."""

from collections import defaultdict

from django.db.models import QuerySet

from approvals.models import QuotaRequest
from quotas.kube.plan import AllocationChange, resource_plan
from quotas.kube.sync import Outcome, cluster_preview
from quotas.roles import AnyUser, sees_everything
from quotas.selectors import team_ids_of


def requests_visible_to(user: AnyUser) -> QuerySet[QuotaRequest]:
    """Admins and auditors see every request; people of a team see their team's."""
    if not user.is_authenticated or not user.is_active:
        return QuotaRequest.objects.none()
    if sees_everything(user):
        return QuotaRequest.objects.all()
    return QuotaRequest.objects.filter(team_id__in=team_ids_of(user))


def request_preview(request: QuotaRequest) -> dict[str, list[Outcome]]:
    """Per cluster, what approving the request would change, from server-side dry runs."""
    changes: dict[int, list[AllocationChange]] = defaultdict(list)
    for line in request.lines.select_related("team_namespace", "resource"):
        resource = line.resource
        changes[line.team_namespace.cluster_id].append(
            AllocationChange(
                namespace=line.team_namespace.name,
                resource=resource_plan(resource),
                guarantee=line.final_guarantee,
                cap=line.final_cap,
                per_pod_max=line.final_per_pod_max,
                priority_classes=tuple(line.final_priority_classes),
            )
        )
    result = {}
    for cluster_id, cluster_changes in changes.items():
        outcomes = cluster_preview(cluster_id=cluster_id, changes=cluster_changes)
        name = request.lines.filter(team_namespace__cluster_id=cluster_id).values_list(
            "team_namespace__cluster__name", flat=True
        )[0]
        result[name] = outcomes
    return result
