"""The seed example for approvals: cluster demo (16 GPUs), teams A 6/10, B 4/6, C 2/4."""

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import ApprovalPolicy
from approvals.services import LineInput, request_create
from quotas.models import Team, TeamMembership, TeamNamespace
from quotas.services import allocation_set
from tests.conftest import make_user


@pytest.fixture
def plan(db, cluster, gpu, team_a, team_b, admin):
    team_c = Team.objects.create(slug="team-c", name="Team C")
    namespaces = {}
    for team, name, g, c in (
        (team_a, "team-a-training", 6, 10),
        (team_b, "team-b-inference", 4, 6),
        (team_c, "team-c-dev", 2, 4),
    ):
        ns = TeamNamespace.objects.create(team=team, cluster=cluster, name=name)
        allocation_set(team_namespace=ns, resource=gpu, guarantee=g, cap=c, acting_user=admin)
        namespaces[team.slug] = ns
    return namespaces


@pytest.fixture
def lead_c(plan):
    user = make_user("lead-c")
    TeamMembership.objects.create(
        team=plan["team-c"].team, user=user, role=TeamMembership.Role.LEAD
    )
    return user


@pytest.fixture
def strict_policy(cluster):
    """No auto-approval: every request waits for an admin."""
    return ApprovalPolicy.objects.create(
        cluster=cluster, auto_approve_decreases=False, auto_approve_increase_max=0
    )


def new_request(user, ns, gpu, guarantee, cap, *, kind="permanent", ends_in=None, **kwargs):
    return request_create(
        team=ns.team,
        acting_user=user,
        justification="more training runs",
        lines=[LineInput(ns.pk, gpu.pk, guarantee, cap, kwargs.get("per_pod_max"))],
        kind=kind,
        starts_at=kwargs.get("starts_at"),
        ends_at=timezone.now() + ends_in if ends_in else None,
    )


@pytest.fixture
def make_request():
    return new_request


__all__ = ["new_request", "timedelta"]
