"""Validation of a request against the whole plan of every cluster it touches.

Builds the facts the pure rules in quotas.rules work on from the database: the cluster's
capacities and share, its current allocations (approved changes are written to allocations
at approval, so they count at once), plus temporary grants approved to start later, and last
month's typical daily peaks from the usage rollups.
"""

from collections import defaultdict
from decimal import Decimal

from django.utils import timezone

from approvals.models import QuotaRequest, RequestLine
from quotas.models import Allocation, Cluster
from quotas.rules import AllocationFacts, Finding, PlanChange, check_change
from quotas.selectors import allocation_facts, cluster_facts
from quotas.usage.selectors import typical_daily_peaks


def _scheduled_grants(cluster: Cluster, exclude_request_id: int | None) -> list[AllocationFacts]:
    """Temporary grants approved to start later: their guarantees are promised already."""
    lines = (
        RequestLine.objects.filter(
            request__status=QuotaRequest.Status.APPROVED,
            request__kind=QuotaRequest.Kind.TEMPORARY,
            request__starts_at__gt=timezone.now(),
            team_namespace__cluster=cluster,
        )
        .exclude(request_id=exclude_request_id)
        .select_related("team_namespace", "resource")
    )
    return [
        AllocationFacts(
            cluster=cluster.name,
            namespace=line.team_namespace.name,
            resource=line.resource.name,
            guarantee=line.final_guarantee,
            cap=line.final_cap,
            per_pod_max=line.final_per_pod_max,
            workload_class=line.team_namespace.workload_class,
        )
        for line in lines
    ]


def validate_lines(
    lines: list[RequestLine], *, final: bool, exclude_request_id: int | None = None
) -> list[Finding]:
    """Findings for the request's lines: requested values, or the decided ones when final."""
    by_cluster: dict[int, list[RequestLine]] = defaultdict(list)
    for line in lines:
        by_cluster[line.team_namespace.cluster_id].append(line)
    findings: list[Finding] = []
    for cluster_id, cluster_lines in sorted(by_cluster.items()):
        cluster = Cluster.objects.get(pk=cluster_id)
        current = Allocation.objects.filter(team_namespace__cluster=cluster).select_related(
            "team_namespace__cluster", "resource"
        )
        allocations = [allocation_facts(a) for a in current]
        allocations += _scheduled_grants(cluster, exclude_request_id)
        by_key = {(a.namespace, a.resource): a for a in allocations}
        changes = []
        for line in cluster_lines:
            guarantee = line.final_guarantee if final else line.requested_guarantee
            cap = line.final_cap if final else line.requested_cap
            per_pod = line.final_per_pod_max if final else line.requested_per_pod_max
            changes.append(
                PlanChange(
                    cluster=cluster.name,
                    namespace=line.team_namespace.name,
                    resource=line.resource.name,
                    guarantee=Decimal(guarantee),
                    cap=Decimal(cap),
                    per_pod_max=per_pod,
                    current=by_key.get((line.team_namespace.name, line.resource.name)),
                )
            )
        findings += check_change(
            cluster=cluster_facts(cluster),
            allocations=allocations,
            changes=changes,
            usage=typical_daily_peaks(cluster=cluster, today=timezone.localdate()),
        )
    return findings


def findings_json(findings: list[Finding]) -> list[dict]:
    return [
        {
            "level": f.level,
            "rule": f.rule,
            "field": f.field,
            "message": f.message,
            "cluster": f.cluster,
            "namespace": f.namespace,
            "resource": f.resource,
        }
        for f in findings
    ]
