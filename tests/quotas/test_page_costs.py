"""Pages whose reads were made cheaper keep their answers: the suggestions page reads whether
each row may become a request in one query (the same answer as suggestion_requestable_by), and
team_ids_of and team_scope read the memberships as they are at each call (nothing is kept)."""

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db import connection
from django.test.utils import CaptureQueriesContext

from quotas.models import Team, TeamMembership
from quotas.selectors import team_ids_of, team_scope, teams_requestable_by, teams_visible_to
from tests.support.people import make_user
from tests.support.worlds import grow_world
from usage.suggestion_selectors import suggestion_requestable_by

pytestmark = pytest.mark.django_db


def _suggestions_page(client) -> tuple[int, str]:
    with CaptureQueriesContext(connection) as seen:
        response = client.get("/suggestions/")
    assert response.status_code == 200
    return len(seen.captured_queries), response.content.decode()


def test_the_suggestions_page_reads_a_fixed_number_of_queries_and_offers_the_same_buttons(
    client, admin
):
    lead = make_user("lead-t1")
    grow_world(teams=2, clusters=1, requests_per_team=0, admin=admin)
    TeamMembership.objects.create(
        team=Team.objects.get(slug="t1"), user=lead, role=TeamMembership.Role.LEAD
    )
    member = make_user("member-t0")
    TeamMembership.objects.create(
        team=Team.objects.get(slug="t0"), user=member, role=TeamMembership.Role.MEMBER
    )
    counts = {}
    for who in (admin, lead, member):
        client.force_login(who)
        small, _ = _suggestions_page(client)
        grow_world(teams=8, clusters=3, requests_per_team=0, admin=admin)
        large, html = _suggestions_page(client)
        counts[who.username] = (small, large)
        from usage.models import Suggestion

        for s in Suggestion.objects.select_related("team_namespace"):
            button = f'href="/requests/from-suggestion/{s.pk}/"'
            assert (button in html) == suggestion_requestable_by(who, s), (who, s)
    assert all(small == large for small, large in counts.values()), counts


def test_a_change_of_membership_or_team_is_seen_at_the_next_call(admin):
    lead = make_user("lead")
    team = Team.objects.create(slug="a", name="A")
    other = Team.objects.create(slug="b", name="B")
    assert team_ids_of(lead) == set()
    membership = TeamMembership.objects.create(team=team, user=lead, role=TeamMembership.Role.LEAD)
    assert team_ids_of(lead) == {team.pk}
    other.parent = team  # a department's lead sees its teams
    other.save()
    assert team_ids_of(lead) == {team.pk, other.pk}
    TeamMembership.objects.filter(pk=membership.pk).update(role=TeamMembership.Role.MEMBER)
    assert team_ids_of(lead, roles=(TeamMembership.Role.LEAD,)) == set()  # no signal: still seen
    membership.delete()
    assert team_ids_of(lead) == set()


def _ids(teams) -> set[int]:
    return set(teams.values_list("pk", flat=True))


def test_a_team_scope_gives_the_answers_of_the_team_selectors(admin, auditor):
    """What a page reads once per request (team_scope) is what each selector would answer."""
    department = Team.objects.create(slug="dept", name="Dept")
    child = Team.objects.create(slug="child", name="Child", parent=department)
    grandchild = Team.objects.create(slug="grandchild", name="Grandchild", parent=child)
    member_team = Team.objects.create(slug="m", name="M")
    Team.objects.create(slug="elsewhere", name="Elsewhere")
    lead = make_user("dept-lead")
    TeamMembership.objects.create(team=department, user=lead, role=TeamMembership.Role.LEAD)
    TeamMembership.objects.create(team=member_team, user=lead, role=TeamMembership.Role.MEMBER)
    member = make_user("child-member")
    TeamMembership.objects.create(team=child, user=member, role=TeamMembership.Role.MEMBER)
    TeamMembership.objects.create(team=member_team, user=auditor, role=TeamMembership.Role.LEAD)
    gone = make_user("gone")
    TeamMembership.objects.create(team=department, user=gone, role=TeamMembership.Role.LEAD)
    gone.is_active = False
    gone.save()
    for user in (admin, auditor, lead, member, gone, AnonymousUser()):
        scope = team_scope(user)
        assert _ids(scope.teams_visible()) == _ids(teams_visible_to(user)), user
        assert _ids(scope.teams_requestable()) == _ids(teams_requestable_by(user)), user
        assert scope.may_request_any() == teams_requestable_by(user).exists(), user
    # The memberships and every level of departments below them in one query (the others:
    # the user's groups, which a request reads with the user).
    with CaptureQueriesContext(connection) as read:
        scope = team_scope(lead)
    teams = [q["sql"] for q in read.captured_queries if "auth_group" not in q["sql"]]
    assert len(teams) == 1, teams
    assert scope.visible_ids == {department.pk, child.pk, grandchild.pk, member_team.pk}
    assert scope.requestable_ids == {department.pk, child.pk, grandchild.pk}
    assert scope.roles == {department.pk: "lead", member_team.pk: "member"}


def test_a_team_scope_is_read_at_each_call(admin):
    lead = make_user("lead")
    team = Team.objects.create(slug="a", name="A")
    assert team_scope(lead).visible_ids == set()
    TeamMembership.objects.create(team=team, user=lead, role=TeamMembership.Role.LEAD)
    assert team_scope(lead).requestable_ids == {team.pk}
