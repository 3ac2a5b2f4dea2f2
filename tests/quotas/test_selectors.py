"""One selector decides who sees which teams and allocations."""

import pytest
from django.contrib.auth.models import AnonymousUser

from quotas.models import Team, TeamMembership, TeamNamespace
from quotas.selectors import (
    allocations_visible_to,
    capacity_summary,
    namespaces_visible_to,
    teams_led_by,
    teams_requestable_by,
    teams_visible_to,
)
from tests.support.people import make_user

pytestmark = pytest.mark.django_db


def slugs(qs) -> list[str]:
    return sorted(qs.values_list("slug", flat=True))


def test_admin_and_auditor_see_every_team(admin, auditor, team_a, team_b):
    assert slugs(teams_visible_to(admin)) == ["team-a", "team-b"]
    assert slugs(teams_visible_to(auditor)) == ["team-a", "team-b"]


def test_lead_and_member_see_only_their_team(lead_a, member_a, other_team_lead, alloc_a, alloc_b):
    assert slugs(teams_visible_to(lead_a)) == ["team-a"]
    assert slugs(teams_visible_to(member_a)) == ["team-a"]
    assert slugs(teams_visible_to(other_team_lead)) == ["team-b"]
    assert [a.team_namespace.name for a in allocations_visible_to(lead_a)] == ["team-a-training"]
    assert [n.name for n in namespaces_visible_to(other_team_lead)] == ["team-b-inference"]


def test_user_without_team_sees_nothing(db, alloc_a):
    nobody = make_user("nobody")
    assert not teams_visible_to(nobody).exists()
    assert not allocations_visible_to(nobody).exists()


def test_anonymous_and_inactive_users_see_nothing(lead_a, alloc_a):
    assert not teams_visible_to(AnonymousUser()).exists()
    lead_a.is_active = False
    lead_a.save()
    assert not teams_visible_to(lead_a).exists()


def test_inactive_admin_sees_nothing(admin, team_a):
    admin.is_active = False
    admin.save()
    assert not teams_visible_to(admin).exists()


def test_department_lead_sees_the_teams_below(db, cluster):
    dept = Team.objects.create(slug="research", name="Research")
    vision = Team.objects.create(slug="vision", name="Vision", parent=dept)
    Team.objects.create(slug="nlp", name="NLP", parent=vision)
    Team.objects.create(slug="ops", name="Ops")
    head = make_user("head")
    TeamMembership.objects.create(team=dept, user=head, role=TeamMembership.Role.LEAD)
    assert slugs(teams_visible_to(head)) == ["nlp", "research", "vision"]
    assert slugs(teams_led_by(head)) == ["nlp", "research", "vision"]


def test_member_is_not_a_lead(member_a, lead_a):
    assert not teams_led_by(member_a).exists()
    assert slugs(teams_led_by(lead_a)) == ["team-a"]


def test_capacity_summary_sums_guarantees_and_caps(alloc_a, alloc_b, cluster):
    [line] = capacity_summary()
    assert (line.cluster, line.resource, line.capacity) == ("demo", "nvidia.com/gpu", 16)
    assert (line.guaranteed, line.capped, line.free_guarantee) == (10, 16, 6)
    assert str(line.overcommit_ratio) == "1.00"
    assert not line.over_promised
    TeamNamespace.objects.filter(pk=alloc_b.team_namespace_id).delete()
    [line] = capacity_summary(cluster_ids=[cluster.id])
    assert (line.guaranteed, line.capped) == (6, 10)


def test_teams_requestable_by_admins_all_and_leads_theirs(
    admin, auditor, lead_a, member_a, other_team_lead, team_a, team_b
):
    department = Team.objects.create(slug="dept", name="Department")
    Team.objects.filter(pk=team_b.pk).update(parent=department)
    dept_lead = make_user("dept-lead")
    TeamMembership.objects.create(team=department, user=dept_lead, role=TeamMembership.Role.LEAD)
    assert slugs(teams_requestable_by(admin)) == ["dept", "team-a", "team-b"]
    assert slugs(teams_requestable_by(lead_a)) == ["team-a"]
    assert slugs(teams_requestable_by(dept_lead)) == ["dept", "team-b"]
    assert slugs(teams_requestable_by(member_a)) == []
    assert slugs(teams_requestable_by(auditor)) == []
    assert slugs(teams_requestable_by(AnonymousUser())) == []
