"""A cap above the cluster's share, as the seed document's own example has it (team A 6/10 on
16 GPUs, share 50%): the cluster overview says why the rule matters and offers whoever may ask
for that team a request form already holding the cap within the rule; nobody else gets it."""

import html
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client

from quotas.models import Allocation

pytestmark = pytest.mark.django_db


def _page(user, url="/clusters/") -> str:
    client = Client()
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def _fix_link(page: str) -> str | None:
    found = re.search(r'href="([^"]+)" data-testid="finding-fix"', page)
    return html.unescape(found.group(1)) if found else None


def test_the_finding_says_why_and_offers_the_cap_within_the_rule(plan, lead_a, admin):
    for user in (lead_a, admin):
        page = _page(user)
        assert "cap 10 exceeds 50% of cluster demo capacity 16" in page
        assert 'data-testid="finding-why"' in page and "whenever the others are idle" in page
        link = _fix_link(page)
        assert link is not None and "Ask for cap 8 instead" in page
        query = parse_qs(urlsplit(link).query)
        team_a = plan["team-a"]
        assert query == {
            "team": [str(team_a.team_id)],
            "namespace": [str(team_a.pk)],
            "resource": [str(Allocation.objects.get(team_namespace=team_a).resource_id)],
            "guarantee": ["6"],
            "cap": ["8"],
        }


def test_who_may_not_ask_for_the_team_gets_no_fix(plan, lead_c, auditor):
    # An auditor reads the finding, with why, but asks for nothing.
    page = _page(auditor)
    assert "cap 10 exceeds 50%" in page and "whenever the others are idle" in page
    assert _fix_link(page) is None
    # Another team's lead does not see team A's finding at all.
    assert "cap 10 exceeds" not in _page(lead_c)


def test_the_link_opens_the_form_with_the_line_filled_in(plan, lead_a, lead_c):
    team_a = plan["team-a"]
    resource = Allocation.objects.get(team_namespace=team_a).resource_id
    link = f"/requests/new/?team={team_a.team_id}&namespace={team_a.pk}&resource={resource}"
    page = _page(lead_a, link + "&guarantee=6&cap=8")
    assert re.search(r'name="lines-0-cap"[^>]*value="8"', page)
    assert re.search(r'name="lines-0-guarantee"[^>]*value="6"', page)
    assert re.search(
        rf'name="lines-0-team_namespace"[^>]*>.*?<option value="{team_a.pk}" selected', page, re.S
    )
    # Nothing is asked by opening it.
    from approvals.models import QuotaRequest

    assert not QuotaRequest.objects.exists()
    # A forged amount is not put in; a namespace of a team one may not ask for is not filled.
    page = _page(lead_a, link + "&guarantee=6&cap=8e3")
    assert re.search(r'name="lines-0-cap"[^>]*value="10"', page)
    page = _page(lead_c, link + "&cap=8")
    assert not re.search(r'name="lines-0-cap"[^>]*value="8"', page)
