"""Pages whose reads were made cheaper keep their answers: the suggestions page reads whether
each row may become a request in one query (the same answer as suggestion_requestable_by), and
a web request keeps team_ids_of's answers only until a membership or team changes."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from quotas.models import Team, TeamMembership
from quotas.selectors import team_ids_of, team_ids_remembered
from quotas.usage.suggestion_selectors import suggestion_requestable_by
from tests.support.people import make_user
from tests.support.worlds import grow_world

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
        from quotas.models import Suggestion

        for s in Suggestion.objects.select_related("team_namespace"):
            button = f'action="/requests/from-suggestion/{s.pk}/"'
            assert (button in html) == suggestion_requestable_by(who, s), (who, s)
    assert all(small == large for small, large in counts.values()), counts


def test_a_web_request_reads_the_teams_of_a_user_once(admin):
    lead = make_user("lead")
    team = Team.objects.create(slug="a", name="A")
    TeamMembership.objects.create(team=team, user=lead, role=TeamMembership.Role.LEAD)
    with team_ids_remembered():
        with CaptureQueriesContext(connection) as first:
            assert team_ids_of(lead) == {team.pk}
        assert len(first.captured_queries) > 0
        with CaptureQueriesContext(connection) as again:
            assert team_ids_of(lead) == {team.pk}
            assert team_ids_of(lead, roles=("member", "lead")) == {team.pk}
            assert team_ids_of(lead, roles=("lead", "member")) == {team.pk}  # the same key
            assert team_ids_of(lead, roles=("member",)) == set()
        # The plain call is kept; each other set of roles is read once.
        assert len(again.captured_queries) == len(first.captured_queries) + 1


def test_a_change_of_membership_or_team_is_seen_within_the_same_request(admin):
    lead = make_user("lead")
    team = Team.objects.create(slug="a", name="A")
    other = Team.objects.create(slug="b", name="B")
    with team_ids_remembered():
        assert team_ids_of(lead) == set()
        membership = TeamMembership.objects.create(
            team=team, user=lead, role=TeamMembership.Role.LEAD
        )
        assert team_ids_of(lead) == {team.pk}
        other.parent = team  # a department's lead sees its teams
        other.save()
        assert team_ids_of(lead) == {team.pk, other.pk}
        membership.delete()
        assert team_ids_of(lead) == set()
    # Outside a web request nothing is kept.
    TeamMembership.objects.create(team=other, user=lead, role=TeamMembership.Role.MEMBER)
    assert team_ids_of(lead) == {other.pk}


def test_the_kept_answer_cannot_be_changed_by_its_caller(admin):
    lead = make_user("lead")
    team = Team.objects.create(slug="a", name="A")
    TeamMembership.objects.create(team=team, user=lead, role=TeamMembership.Role.LEAD)
    with team_ids_remembered():
        team_ids_of(lead).add(999)
        assert team_ids_of(lead) == {team.pk}
