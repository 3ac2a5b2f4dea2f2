"""Every page is computed for its request: nothing is kept between requests, so a page never
shows rights or data older than the request. Run outside a test transaction (as the web server
runs), on whichever database the tests use: SQLite and PostgreSQL alike."""

import pytest
from django.contrib.auth.models import User

from approvals.lifecycle import request_submit
from quotas.roles import PLATFORM_ADMINS, ensure_role_groups
from quotas.services import allocation_set
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db(transaction=True)


def _page(client, url: str) -> str:
    response = client.get(url, HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 200
    return response.content.decode()


def test_a_demoted_superuser_sees_the_lead_view_on_the_very_next_request(client, plan, lead_a):
    User.objects.filter(pk=lead_a.pk).update(is_superuser=True)
    client.force_login(lead_a)
    for url in ("/", "/requests/", "/clusters/"):
        _page(client, url)  # as if the page had been asked for just before
    home = _page(client, "/")
    assert "All teams" in home and "Team B" in home
    assert "Teams other than yours" not in _page(client, "/clusters/")
    assert client.get("/requests/?team=team-b").status_code == 200
    # Demoted by a write no code of the portal sees (no save(), no signal).
    User.objects.filter(pk=lead_a.pk).update(is_superuser=False)
    home = _page(client, "/")
    assert "Your teams" in home and "All teams" not in home
    assert "Team B" not in home
    assert "Teams other than yours" in _page(client, "/clusters/")
    assert client.get("/requests/?team=team-b").status_code == 400  # not a team they may see


def test_a_platform_admin_taken_out_of_the_group_is_a_lead_at_the_next_request(
    client, plan, lead_a
):
    admins, _ = ensure_role_groups()
    lead_a.groups.add(admins)
    client.force_login(lead_a)
    assert "All teams" in _page(client, "/")
    # The membership row itself deleted (no m2m signal).
    User.groups.through.objects.filter(user_id=lead_a.pk, group__name=PLATFORM_ADMINS).delete()
    home = _page(client, "/")
    assert "Your teams" in home and "Team B" not in home


def test_a_change_by_another_user_is_seen_on_the_next_page_load(
    client, plan, lead_a, gpu, admin, strict_policy
):
    client.force_login(admin)
    assert "team-a-training" not in _page(client, "/requests/")
    assert "team-a-training" not in _page(client, "/requests/?status=submitted")
    draft = new_request(lead_a, plan["team-a"], gpu, 7, 10)  # by the lead, not the admin
    assert "team-a-training" in _page(client, "/requests/")
    assert "team-a-training" not in _page(client, "/requests/?status=submitted")
    request_submit(request=draft, acting_user=lead_a, usage_now={})
    assert "team-a-training" in _page(client, "/requests/?status=submitted")
    before = _page(client, "/clusters/")
    allocation_set(
        team_namespace=plan["team-c"], resource=gpu, guarantee=3, cap=5, acting_user=admin
    )
    after = _page(client, "/clusters/")
    assert after != before
    summary = _page(client, "/summary/")
    allocation_set(
        team_namespace=plan["team-c"], resource=gpu, guarantee=1, cap=2, acting_user=admin
    )
    assert _page(client, "/summary/") != summary


def test_the_lead_sees_the_admins_change_on_the_next_dashboard(client, plan, lead_a, gpu, admin):
    client.force_login(lead_a)
    assert "team-a-training" in _page(client, "/")
    home = _page(client, "/")
    allocation_set(
        team_namespace=plan["team-a"], resource=gpu, guarantee=5, cap=9, acting_user=admin
    )
    assert _page(client, "/") != home
