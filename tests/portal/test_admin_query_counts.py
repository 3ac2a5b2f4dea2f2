"""Every Django admin list costs the same number of queries whatever the number of rows.

Each registered ModelAdmin's changelist is opened at two data sizes; a related object read per
row (an N+1: a __str__ or a list column following a foreign key) shows as a count that grows.
"""

from datetime import date, timedelta
from decimal import Decimal

import pytest
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from django_celery_beat.models import (
    ClockedSchedule,
    CrontabSchedule,
    IntervalSchedule,
    PeriodicTask,
    SolarSchedule,
)

from approvals.models import Approval, ApprovalPolicy, QuotaRequest, RequestComment, RequestLine
from common.models import IdempotencyKey
from portal.models import SsoIdentity, WorkerHeartbeat
from portal.tokens import api_token_create
from quotas.audit.chain import audit_record
from quotas.models import (
    Allocation,
    AllocationVersion,
    Cluster,
    ClusterCapacity,
    DriftEvent,
    ManagedObject,
    PriorityClass,
    Resource,
    RunTimeLimit,
    SyncLease,
    SyncObjectResult,
    SyncRequest,
    SyncRun,
    Team,
    TeamMembership,
    TeamNamespace,
)
from usage.models import (
    PrometheusSource,
    Suggestion,
    SuggestionBacktest,
    UsageDaily,
    UsageSample,
)

pytestmark = pytest.mark.django_db

SMALL, LARGE = 2, 6
# Models with one row at most, whatever the data (the audit chain's head).
SINGLETONS = {"quotas.AuditChainHead"}


def _grow(i: int) -> None:
    """One more of everything the admin lists: a team on its own cluster with its namespace,
    allocation and history, a request, syncs, usage, tokens, login records and schedules."""
    now = timezone.now()
    user = User.objects.create_user(f"user{i}", f"user{i}@example.com", "pw")
    user.groups.add(Group.objects.create(name=f"group{i}"))
    cluster = Cluster.objects.create(name=f"cluster{i}")
    resource = Resource.objects.create(name=f"example.com/gpu-{i}", display_name=f"GPU {i}")
    ClusterCapacity.objects.create(cluster=cluster, resource=resource, capacity=Decimal(100))
    priority_class = PriorityClass.objects.create(name=f"class-{i}", value=1000 + i)
    parent = Team.objects.filter(slug="team0").first()
    team = Team.objects.create(slug=f"team{i}", name=f"Team {i}", parent=parent)
    TeamMembership.objects.create(team=team, user=user, role=TeamMembership.Role.LEAD)
    namespace = TeamNamespace.objects.create(team=team, cluster=cluster, name=f"team{i}-train")
    RunTimeLimit.objects.create(
        team_namespace=namespace, priority_class=priority_class, max_seconds=3600
    )
    allocation = Allocation.objects.create(
        team_namespace=namespace, resource=resource, guarantee=Decimal(1), cap=Decimal(2)
    )
    AllocationVersion.objects.create(
        allocation=allocation,
        version=1,
        guarantee=Decimal(1),
        cap=Decimal(2),
        changed_by=user,
    )
    audit_record(acting_user=user, action="allocation.set", target=allocation)

    run = SyncRun.objects.create(cluster=cluster, trigger="manual", mode="enforce")
    SyncObjectResult.objects.create(
        run=run,
        api_version="v1",
        kind="ResourceQuota",
        namespace=namespace.name,
        name="q",
        action=SyncObjectResult.Action.UPDATED,
    )
    SyncRequest.objects.create(cluster=cluster, requested_by=user, reason=f"test {i}")
    DriftEvent.objects.create(cluster=cluster, api_version="v1", kind="ResourceQuota", name="q")
    ManagedObject.objects.create(
        cluster=cluster, api_version="v1", kind="ResourceQuota", namespace=namespace.name, name="q"
    )
    SyncLease.objects.create(cluster=cluster, holder=f"worker{i}")

    request = QuotaRequest.objects.create(
        team=team, requested_by=user, justification=f"needs {i}", decided_by=user
    )
    RequestLine.objects.create(
        request=request,
        team_namespace=namespace,
        resource=resource,
        requested_guarantee=Decimal(2),
        requested_cap=Decimal(3),
    )
    Approval.objects.create(request=request, admin=user)
    RequestComment.objects.create(request=request, author=user, text=f"comment {i}")
    ApprovalPolicy.objects.create(cluster=cluster)

    api_token_create(user=user, name=f"token {i}", days=30)
    IdempotencyKey.objects.create(
        user=user,
        key=f"key-{i}",
        fingerprint="f" * 64,
        method="POST",
        path="/api/v1/x",
        expires_at=now + timedelta(hours=1),
    )
    WorkerHeartbeat.objects.create(hostname=f"worker{i}", last_seen=now)
    SsoIdentity.objects.create(
        user=user, issuer="https://id.example.com", subject=f"subject-{i}", last_login_at=now
    )

    UsageSample.objects.create(
        team_namespace=namespace,
        resource=resource,
        timestamp=now,
        allocated=Decimal(1),
        source="cluster",
    )
    UsageDaily.objects.create(
        team_namespace=namespace,
        resource=resource,
        day=date(2026, 1, 1) + timedelta(days=i),
        source="cluster",
        samples=1,
        peak=Decimal(1),
        p95=Decimal(1),
        mean=Decimal(1),
        gpu_hours=Decimal(1),
        borrowed_gpu_hours=Decimal(0),
        idle_guaranteed_gpu_hours=Decimal(0),
    )
    PrometheusSource.objects.create(cluster=cluster, url=f"http://127.0.0.1:{9000 + i}")
    Suggestion.objects.create(
        cluster=cluster,
        team_namespace=namespace,
        resource=resource,
        month=date(2026, 1, 1),
        current_guarantee=Decimal(1),
        current_cap=Decimal(2),
        suggested_guarantee=Decimal(1),
        suggested_cap=Decimal(2),
        confidence=Suggestion.Confidence.HIGH,
        computed_at=now,
    )
    SuggestionBacktest.objects.create(
        cluster=cluster,
        resource=resource,
        month=date(2026, 1, 1),
        policy=SuggestionBacktest.Policy.SUGGESTED,
        namespaces=1,
        demand=Decimal(10),
        covered=Decimal(8),
        borrowed=Decimal(2),
        blocked=Decimal(0),
        idle=Decimal(1),
        guaranteed=Decimal(9),
        cost=Decimal(2),
        computed_at=now,
    )

    login = {"user_agent": "test", "http_accept": "*/*", "path_info": "/login/"}
    AccessAttempt.objects.create(
        username=f"user{i}",
        ip_address=f"127.0.0.{i + 1}",
        get_data="",
        post_data="",
        failures_since_start=1,
        **login,
    )
    AccessLog.objects.create(username=f"user{i}", ip_address="127.0.0.1", **login)
    AccessFailureLog.objects.create(username=f"user{i}", ip_address="127.0.0.1", **login)

    interval = IntervalSchedule.objects.create(every=i + 1, period=IntervalSchedule.SECONDS)
    CrontabSchedule.objects.create(minute=str(i))
    SolarSchedule.objects.create(event="sunrise", latitude=Decimal(i), longitude=Decimal(i))
    ClockedSchedule.objects.create(clocked_time=now + timedelta(days=i))
    PeriodicTask.objects.create(name=f"task {i}", task="celery.ping", interval=interval)


def _measure(client) -> dict[str, tuple[int, int]]:
    """(queries, rows) of every registered changelist."""
    found = {}
    for model in admin.site._registry:
        opts = model._meta
        url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        assert response.status_code == 200, url
        rows = response.context["cl"].result_count
        found[opts.label] = (len(queries), rows)
    return found


@pytest.fixture
def superuser_client(client):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


def test_every_changelist_costs_the_same_queries_at_two_sizes(superuser_client):
    for i in range(SMALL):
        _grow(i)
    small = _measure(superuser_client)
    for i in range(SMALL, LARGE):
        _grow(i)
    large = _measure(superuser_client)

    assert set(small) == {m._meta.label for m in admin.site._registry}
    no_more_rows = [
        label for label in small if label not in SINGLETONS and large[label][1] <= small[label][1]
    ]
    assert no_more_rows == [], "the data builder must add rows to every list"
    growing = {
        label: f"{small[label][0]} queries for {small[label][1]} rows, "
        f"{large[label][0]} for {large[label][1]}"
        for label in small
        if large[label][0] != small[label][0]
    }
    assert growing == {}
