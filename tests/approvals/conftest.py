"""Fixtures of the approvals tests; the seed example's (plan, lead_c, strict_policy) live in
tests/conftest.py, the helpers in tests/support."""

import pytest

from approvals.lifecycle import request_approve, request_create
from approvals.lines import LineInput
from quotas.models import Team, TeamMembership, TeamNamespace
from quotas.services import allocation_set


@pytest.fixture
def grow(cluster, gpu, admin, lead_c, strict_policy):
    """grow(n): n more teams led by lead-c, each with a namespace, an allocation and three
    requests (a draft, one waiting, one approved)."""

    def more(n: int) -> None:
        for _ in range(n):
            slug = f"grown-{Team.objects.count()}"
            team = Team.objects.create(slug=slug, name=slug)
            TeamMembership.objects.create(team=team, user=lead_c, role=TeamMembership.Role.LEAD)
            ns = TeamNamespace.objects.create(team=team, cluster=cluster, name=f"{slug}-ns")
            allocation_set(team_namespace=ns, resource=gpu, guarantee=0, cap=1, acting_user=admin)
            for step in ("draft", "submit", "approve"):
                request = request_create(
                    team=team,
                    acting_user=lead_c,
                    justification="grown",
                    lines=[LineInput(ns.pk, gpu.pk, 0, 2)],
                    submit=step != "draft",
                )
                if step == "approve":
                    request_approve(request=request, acting_user=admin)

    return more
