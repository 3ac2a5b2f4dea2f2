"""A world of teams ``t0, t1, ...`` on clusters ``c0, c1, ...`` for the overview pages' tests:
allocations with two versions, usage samples and rollups, requests in many states, active
temporary grants, suggestions, syncs and drift. ``grow_world`` can be called again with more
teams, clusters and requests, to compare a page's queries at two sizes."""

from datetime import timedelta
from decimal import Decimal

from django.contrib.auth.models import User
from django.utils import timezone

from approvals.models import QuotaRequest, RequestLine
from quotas.audit.chain import audit_record
from quotas.models import (
    Cluster,
    ClusterCapacity,
    DriftEvent,
    Resource,
    SyncRequest,
    SyncRun,
    Team,
    TeamNamespace,
)
from quotas.services import allocation_set
from usage.models import Suggestion, UsageDaily, UsageSample

S = QuotaRequest.Status


# Statuses requests cycle through: in flight first, then finished ones.
STATUSES = [S.SUBMITTED, S.DRAFT, S.APPLIED, S.REJECTED, S.APPLYING, S.WITHDRAWN, S.EXPIRED]


def gpu_resource() -> Resource:
    gpu, _ = Resource.objects.get_or_create(
        name="nvidia.com/gpu", defaults={"display_name": "A100 card", "unit": "GPU"}
    )
    return gpu


def _cluster(i: int, gpu: Resource) -> Cluster:
    cluster, created = Cluster.objects.get_or_create(name=f"c{i}")
    if created:
        ClusterCapacity.objects.create(cluster=cluster, resource=gpu, capacity=Decimal(100))
        run = SyncRun.objects.create(
            cluster=cluster, trigger=SyncRun.Trigger.CHANGE, mode="enforce", status="failed"
        )
        SyncRequest.objects.create(cluster=cluster, status="failed", last_error=f"boom c{i}")
        SyncRequest.objects.create(cluster=cluster, status="pending")
        DriftEvent.objects.create(
            cluster=cluster,
            run=run,
            api_version="v1",
            kind="ResourceQuota",
            namespace=f"t0-c{i}",
            name="gpu-quota",
            changes=[{"path": "spec.hard.requests.nvidia.com/gpu", "old": "4", "new": "9"}],
        )
    return cluster


def add_usage(ns: TeamNamespace, gpu: Resource) -> None:
    now = timezone.now()
    UsageSample.objects.create(
        team_namespace=ns,
        resource=gpu,
        timestamp=now - timedelta(minutes=5),
        allocated=Decimal(5),
        source="cluster",
    )
    today = timezone.localdate()
    for back in range(3):
        UsageDaily.objects.create(
            team_namespace=ns,
            resource=gpu,
            day=today - timedelta(days=back),
            source="cluster",
            samples=288,
            peak=Decimal(5 + back),
            p95=Decimal(5),
            mean=Decimal(4),
            gpu_hours=Decimal(96),
            borrowed_gpu_hours=Decimal(10),
            idle_guaranteed_gpu_hours=Decimal(0),
            guarantee=Decimal(3),
        )


def _namespace(team: Team, cluster: Cluster, gpu: Resource, admin: User) -> TeamNamespace:
    ns, created = TeamNamespace.objects.get_or_create(
        team=team, cluster=cluster, name=f"{team.slug}-{cluster.name}"
    )
    if created:
        allocation_set(
            team_namespace=ns, resource=gpu, guarantee=2, cap=4, acting_user=admin, reason="first"
        )
        allocation_set(
            team_namespace=ns,
            resource=gpu,
            guarantee=3,
            cap=6,
            per_pod_max=2,
            priority_classes=["training"],
            acting_user=admin,
            reason="second",
        )
        add_usage(ns, gpu)
        Suggestion.objects.create(
            cluster=cluster,
            team_namespace=ns,
            resource=gpu,
            month=timezone.localdate().replace(day=1),
            current_guarantee=3,
            current_cap=6,
            suggested_guarantee=4,
            suggested_cap=8,
            confidence="high",
            computed_at=timezone.now(),
        )
    return ns


def _requests(team: Team, ns: TeamNamespace, gpu: Resource, user: User, count: int) -> None:
    for k in range(count):
        request = QuotaRequest.objects.create(
            team=team, requested_by=user, justification="more runs", status=STATUSES[k % 7]
        )
        RequestLine.objects.create(
            request=request,
            team_namespace=ns,
            resource=gpu,
            requested_guarantee=4,
            requested_cap=8,
        )
        audit_record(acting_user=user, action="request.submitted", target=request)
    grant = QuotaRequest.objects.create(
        team=team,
        requested_by=user,
        justification="a deadline",
        kind=QuotaRequest.Kind.TEMPORARY,
        starts_at=timezone.now() - timedelta(days=1),
        ends_at=timezone.now() + timedelta(days=3),
        status=S.ACTIVE,
    )
    RequestLine.objects.create(
        request=grant,
        team_namespace=ns,
        resource=gpu,
        requested_guarantee=5,
        requested_cap=9,
    )


def grow_world(*, teams: int, clusters: int, requests_per_team: int, admin: User) -> dict:
    """Teams t0..t{teams-1} each with a namespace on every cluster c0..c{clusters-1}, and
    ``requests_per_team`` more requests and one more active grant each."""
    gpu = gpu_resource()
    cluster_list = [_cluster(i, gpu) for i in range(clusters)]
    team_list = []
    for j in range(teams):
        team, _ = Team.objects.get_or_create(slug=f"t{j}", defaults={"name": f"Team {j}"})
        namespaces = [_namespace(team, c, gpu, admin) for c in cluster_list]
        _requests(team, namespaces[0], gpu, admin, requests_per_team)
        team_list.append(team)
    return {"gpu": gpu, "clusters": cluster_list, "teams": team_list}
