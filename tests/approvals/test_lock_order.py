"""Every transaction takes its row locks in the one order portal.locks.LOCK_ORDER states, and
only the lock modules lock rows: read from the SQL PostgreSQL runs for each kind of change."""

import ast
import datetime
from decimal import Decimal
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.grants import requests_expire_due, requests_start_due
from approvals.lifecycle import (
    request_approve,
    request_create,
    request_revise,
    requests_follow_syncs,
)
from approvals.lines import LineInput
from approvals.models import ApprovalPolicy
from approvals.policy.clusters import approval_policy_save
from portal.locks import LOCK_ORDER
from quotas.models import ClusterCapacity, PriorityClass, Resource, SyncRequest, Team, TeamNamespace
from quotas.services import (
    cluster_capacity_delete,
    cluster_capacity_set,
    cluster_set_sync_mode,
    priority_class_delete,
    priority_class_save,
    team_namespace_set_shadow,
)
from quotas.teams import team_namespace_save, team_save
from tests.support.locks import assert_in_lock_order, locks_of
from tests.support.requests import new_request
from usage.models import Suggestion

pytestmark = pytest.mark.django_db
REPO = Path(__file__).resolve().parents[2]
LOCK_MODULES = {"quotas/locks.py", "approvals/locks.py"}


def test_only_the_lock_modules_lock_rows():
    offenders = [
        f"{path.relative_to(REPO).as_posix()}:{node.lineno}"
        for package in ("quotas", "approvals")
        for path in sorted((REPO / package).rglob("*.py"))
        if path.relative_to(REPO).as_posix() not in LOCK_MODULES
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr == "select_for_update"
    ]
    assert offenders == []


def test_the_order_names_real_models_once_and_ends_with_the_audit_head():
    assert len(set(LOCK_ORDER)) == len(LOCK_ORDER)
    assert LOCK_ORDER[-1] == "quotas.AuditChainHead"
    assert {"quotas.ClusterCapacity", "approvals.QuotaRequest", "quotas.Allocation"} <= set(
        LOCK_ORDER
    )


HEAD = "quotas_auditchainhead"


def test_a_request_from_a_suggestion_submitted_and_approved_at_once(plan, lead_c, gpu):
    ns = plan["team-c"]
    suggestion = Suggestion.objects.create(
        cluster=ns.cluster,
        team_namespace=ns,
        resource=gpu,
        month=datetime.date(2026, 10, 1),
        current_guarantee=Decimal(2),
        current_cap=Decimal(4),
        suggested_guarantee=Decimal(3),
        suggested_cap=Decimal(4),
        confidence=Suggestion.Confidence.HIGH,
        computed_at=timezone.now(),
    )
    with CaptureQueriesContext(connection) as ctx:
        request = request_create(
            team=ns.team,
            acting_user=lead_c,
            justification="from the suggestion",
            lines=[LineInput(ns.pk, gpu.pk, 3, 4)],
            submit=True,
            suggestion=suggestion,
        )
    assert request.status == "applying"  # auto-approved and applied in the same transaction
    assert assert_in_lock_order(ctx.captured_queries) == [
        "quotas_team",
        "quotas_suggestion",
        "quotas_clustercapacity",
        "approvals_quotarequest",
        "quotas_allocation",
        "quotas_cluster",
        "quotas_auditchainhead",
    ]


def test_a_revised_request_submitted_then_approved_by_an_admin(
    plan, lead_c, gpu, admin, strict_policy
):
    ns = plan["team-c"]
    request = new_request(lead_c, ns, gpu, 3, 5)
    with CaptureQueriesContext(connection) as ctx:
        request = request_revise(
            request=request, acting_user=lead_c, lines=[LineInput(ns.pk, gpu.pk, 4, 6)], submit=True
        )
    assert request.status == "submitted"
    assert assert_in_lock_order(ctx.captured_queries)[:4] == [
        "quotas_team",
        "quotas_clustercapacity",
        "approvals_quotarequest",
        "quotas_allocation",
    ]
    with CaptureQueriesContext(connection) as ctx:
        request = request_approve(request=request, acting_user=admin, comment="ok")
    assert request.status == "applying"
    assert assert_in_lock_order(ctx.captured_queries) == [
        "quotas_team",
        "quotas_clustercapacity",
        "approvals_quotarequest",
        "quotas_allocation",
        "quotas_cluster",
        "quotas_auditchainhead",
    ]


def test_a_temporary_grant_starts_and_expires(plan, lead_c, gpu, admin, strict_policy):
    ns = plan["team-c"]
    starts = timezone.now() + datetime.timedelta(hours=1)
    request = request_create(
        team=ns.team,
        acting_user=lead_c,
        justification="deadline",
        lines=[LineInput(ns.pk, gpu.pk, 4, 6)],
        kind="temporary",
        starts_at=starts,
        ends_at=starts + datetime.timedelta(days=2),
        submit=True,
    )
    request_approve(request=request, acting_user=admin, comment="ok")
    grant_locks = [
        "quotas_team",
        "quotas_clustercapacity",
        "approvals_quotarequest",
        "quotas_allocation",
        "quotas_cluster",
        HEAD,
    ]
    assert locks_of(lambda: requests_start_due(now=starts)) == grant_locks
    request.sync_requests.update(status=SyncRequest.Status.DONE)
    assert requests_follow_syncs(request_ids=[request.pk]) == [request.pk]  # active
    ends = starts + datetime.timedelta(days=3)
    assert locks_of(lambda: requests_expire_due(now=ends)) == grant_locks


@pytest.fixture
def memory(cluster) -> Resource:
    """A resource on the cluster that no namespace has an allocation of (it may be removed)."""
    resource = Resource.objects.create(name="memory", kind=Resource.Kind.MEMORY, unit="GiB")
    ClusterCapacity.objects.create(cluster=cluster, resource=resource, capacity=Decimal(512))
    return resource


def test_the_quota_services_and_policy_edits(plan, gpu, memory, admin, cluster):
    ns = plan["team-a"]
    assert locks_of(
        lambda: cluster_capacity_set(cluster=cluster, resource=gpu, capacity=20, acting_user=admin)
    ) == ["quotas_clustercapacity", "quotas_cluster", HEAD]
    assert locks_of(
        lambda: cluster_set_sync_mode(cluster=cluster, mode="report_only", acting_user=admin)
    ) == ["quotas_cluster", HEAD]
    assert locks_of(
        lambda: team_namespace_set_shadow(team_namespace=ns, shadow=True, acting_user=admin)
    ) == ["quotas_teamnamespace", "quotas_cluster", HEAD]
    assert locks_of(
        lambda: priority_class_save(
            priority_class=PriorityClass(name="batch-low", value=100), acting_user=admin
        )
    ) == ["quotas_cluster", HEAD]
    low = PriorityClass.objects.get(name="batch-low")
    low.description = "batch jobs"
    assert locks_of(lambda: priority_class_save(priority_class=low, acting_user=admin)) == [
        "quotas_priorityclass",
        "quotas_cluster",
        HEAD,
    ]
    assert locks_of(lambda: priority_class_delete(priority_class=low, acting_user=admin)) == [
        "quotas_priorityclass",
        "quotas_cluster",
        HEAD,
    ]
    policy = ApprovalPolicy.objects.create(cluster=cluster)
    policy.auto_approve_increase_max = Decimal(3)
    assert locks_of(lambda: approval_policy_save(policy=policy, acting_user=admin)) == [
        "approvals_approvalpolicy",
        HEAD,
    ]
    capacity = cluster.capacities.get(resource=memory)
    assert locks_of(lambda: cluster_capacity_delete(capacity=capacity, acting_user=admin)) == [
        "quotas_clustercapacity",
        "quotas_cluster",
        HEAD,
    ]


def test_moving_a_namespace_or_a_team_locks_the_teams_first(plan, admin):

    ns = TeamNamespace.objects.get(pk=plan["team-a"].pk)
    ns.team = Team.objects.get(slug="team-b")
    locks = locks_of(lambda: team_namespace_save(team_namespace=ns, acting_user=admin))
    assert locks[:2] == ["quotas_team", "quotas_teamnamespace"], locks
    team_c = Team.objects.get(slug="team-c")
    team_c.parent = Team.objects.get(slug="team-a")
    locks = locks_of(lambda: team_save(team=team_c, acting_user=admin))
    assert locks[0] == "quotas_team", locks  # locks_of checked the order of the rest
