"""The team dashboard at /: who sees which teams, the real figures of each allocation with its
newest usage, the chart's data, requests, grants and suggestions; a fixed number of queries."""

import json
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from approvals.models import QuotaRequest, RequestLine
from quotas.models import Allocation, Resource, Team, TeamMembership
from tests.support.people import make_user
from tests.support.worlds import grow_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(admin):
    return grow_world(teams=2, clusters=1, requests_per_team=7, admin=admin)


@pytest.fixture
def people(world, auditor, admin):
    t0, t1 = world["teams"]
    users = {"admin": admin, "auditor": auditor}
    for name, team, role in (
        ("lead-t0", t0, "lead"),
        ("member-t0", t0, "member"),
        ("lead-t1", t1, "lead"),
    ):
        users[name] = make_user(name)
        TeamMembership.objects.create(team=team, user=users[name], role=role)
    return users


def page_of(client, user, **params):
    client.force_login(user)
    response = client.get(reverse("home"), params)
    assert response.status_code == 200
    return response.content.decode()


def chart_data(page: str) -> list[dict]:
    match = re.search(r'<script id="usage-chart-data" type="application/json">(.*?)</script>', page)
    assert match, "no chart data on the page"
    return json.loads(match.group(1))


def test_anonymous_is_sent_to_login(client):
    response = client.get(reverse("home"))
    assert response.status_code == 302 and response.url.startswith(reverse("login"))


def test_lead_sees_the_real_values_and_usage_of_their_team_only(client, people):
    page = page_of(client, people["lead-t0"])
    assert 'data-testid="team-t0"' in page and 'data-testid="team-t1"' not in page
    assert "t1-c0" not in page and "Team 1" not in page
    row = page.split('data-testid="allocation-t0-c0-nvidiacomgpu"', 1)[1].split("</tr>", 1)[0]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    text = [" ".join(re.sub(r"<[^>]+>", " ", c).split()) for c in cells]
    # cluster, namespace, resource, guarantee, cap, per-pod max, classes, used now, borrowed
    assert text[0] == "c0" and text[1].startswith("t0-c0")
    assert text[3:7] == ["3", "6", "2", "training"]
    assert text[7].startswith("5 ")  # the newest sample, with its time
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d$", text[7])
    assert text[8] == "2"  # 5 used above a guarantee of 3
    assert 'data-testid="new-request-t0"' in page
    assert 'data-testid="platform-links"' not in page


def test_unset_values_read_as_dash_and_any(client, people, world):
    alloc = Allocation.objects.get(team_namespace__name="t0-c0")
    Allocation.objects.filter(pk=alloc.pk).update(per_pod_max=None, priority_classes=[])
    page = page_of(client, people["member-t0"])
    row = page.split('data-testid="allocation-t0-c0-nvidiacomgpu"', 1)[1].split("</tr>", 1)[0]
    text = [
        " ".join(re.sub(r"<[^>]+>", " ", c).split())
        for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    ]
    assert text[5:7] == ["\u2013", "any"]  # an en dash


def test_member_sees_the_team_without_a_request_button(client, people):
    page = page_of(client, people["member-t0"])
    assert 'data-testid="team-t0"' in page and "you are a member" in page
    assert 'data-testid="new-request-t0"' not in page


def test_the_chart_shows_usage_against_guarantee_and_cap_steps(client, people):
    page = page_of(client, people["lead-t0"])
    [chart] = chart_data(page)
    assert f'id="{chart["id"]}" role="img" aria-label="' in page
    traces = {t["name"]: t for t in chart["figure"]["data"]}
    today = timezone.localdate()
    days = [(today - timedelta(days=back)).isoformat() for back in (2, 1, 0)]
    assert traces["daily peak used"]["x"] == days
    assert traces["daily peak used"]["y"] == [7.0, 6.0, 5.0]
    # Both versions were written today: the first one stands for the days before it.
    assert traces["guarantee"]["y"] == [2.0, 2.0, 3.0]
    assert traces["cap"]["y"] == [4.0, 4.0, 6.0]
    assert traces["cap"]["line"]["shape"] == "hv"
    assert "vendor/plotly.min.js" in page and "portal/usage_charts.js" in page


def test_no_usage_is_an_empty_state_without_chart(client, admin):
    grow_world(teams=1, clusters=1, requests_per_team=0, admin=admin)
    from usage.models import UsageDaily, UsageSample

    UsageDaily.objects.all().delete()
    UsageSample.objects.all().delete()
    page = page_of(client, admin)
    assert "No usage recorded yet." in page
    assert "usage-chart-data" not in page


def test_requests_grants_and_suggestions_of_the_team(client, people, world):
    t0 = world["teams"][0]
    page = page_of(client, people["lead-t0"])
    requests = QuotaRequest.objects.filter(team=t0)
    pending = page.split('data-testid="pending-t0"', 1)[1].split('data-testid="recent-t0"', 1)[0]
    recent = page.split('data-testid="recent-t0"', 1)[1].split("</div>", 1)[0]
    for r in requests.exclude(status="active"):
        in_flight = r.status in ("submitted", "draft", "applying")
        where, other = (pending, recent) if in_flight else (recent, pending)
        assert f'href="/requests/{r.pk}/"' in where and f'href="/requests/{r.pk}/"' not in other
    grant = requests.get(status="active")
    grants = page.split('data-testid="grants-t0"', 1)[1].split("</ul>", 1)[0]
    assert f'href="/requests/{grant.pk}/"' in grants
    assert timezone.localtime(grant.ends_at).strftime("%Y-%m-%d %H:%M") in grants
    assert "5 / 9" in grants
    suggestions = page.split('data-testid="suggestions-t0"', 1)[1].split("</table>", 1)[0]
    assert "t0-c0" in suggestions and "<strong>4</strong>" in suggestions


def test_grants_show_their_lines_in_order_and_a_grant_without_lines_too(client, people, world):
    grant = QuotaRequest.objects.get(team=world["teams"][0], status="active")
    line = grant.lines.get()
    RequestLine.objects.create(
        request=grant,
        team_namespace=line.team_namespace,
        resource=Resource.objects.create(name="cpu", display_name="CPU", unit="core"),
        requested_guarantee=7,
        requested_cap=8,
        decided_guarantee=6,  # decided: shown instead of what was asked
        decided_cap=7,
    )
    later = QuotaRequest.objects.create(
        team=world["teams"][0],
        requested_by=people["lead-t0"],
        justification="no lines",
        kind=QuotaRequest.Kind.TEMPORARY,
        ends_at=grant.ends_at + timedelta(days=1),
        status="active",
    )
    page = page_of(client, people["lead-t0"])
    grants = page.split('data-testid="grants-t0"', 1)[1].split("</ul>", 1)[0]
    text = " ".join(re.sub(r"<[^>]+>", " ", grants).split())
    assert f"#{grant.pk} " in text and "t0-c0 nvidia.com/gpu 5 / 9; t0-c0 cpu 6 / 7" in text
    assert text.index(f"#{grant.pk} ") < text.index(f"#{later.pk} ")  # soonest end first


def test_a_suggestion_taken_up_by_a_request_is_no_longer_open(client, people, world):
    from usage.models import Suggestion

    suggestion = Suggestion.objects.get(team_namespace__name="t0-c0")
    QuotaRequest.objects.create(
        team=world["teams"][0],
        requested_by=people["lead-t0"],
        justification="from the suggestion",
        status="submitted",
        suggestion=suggestion,
    )
    assert 'data-testid="suggestions-t0"' not in page_of(client, people["lead-t0"])


def test_recent_lists_are_cut_and_link_to_the_full_list(client, admin, people, world):
    grow_world(teams=1, clusters=1, requests_per_team=14, admin=admin)
    page = page_of(client, people["lead-t0"])
    pending = page.split('data-testid="pending-t0"', 1)[1].split('data-testid="recent-t0"', 1)[0]
    assert pending.count('data-testid="request-') == 5
    assert "/requests/?team=t0" in pending


def test_a_departments_lead_may_request_for_its_teams_not_where_only_a_member(client, world):
    t0, t1 = world["teams"]
    department = Team.objects.create(slug="dept", name="Research")
    t0.parent = department
    t0.save()
    boss = make_user("boss")
    TeamMembership.objects.create(team=department, user=boss, role="lead")
    page = page_of(client, boss)
    assert "<code>t0</code> · Research" in page and "you are a lead" in page
    assert 'data-testid="new-request-dept"' in page and 'data-testid="new-request-t0"' in page
    assert 'data-testid="team-t1"' not in page
    TeamMembership.objects.create(team=t1, user=boss, role="member")
    page = page_of(client, boss)
    assert 'data-testid="new-request-t0"' in page and 'data-testid="team-t1"' in page
    assert 'data-testid="new-request-t1"' not in page


@pytest.mark.parametrize("persona", ["lead-t0", "member-t0"])
def test_another_teams_slug_is_a_404_own_is_shown(client, people, persona):
    client.force_login(people[persona])
    assert client.get(reverse("home"), {"team": "t1"}).status_code == 404
    assert client.get(reverse("home"), {"team": "nope"}).status_code == 404
    page = client.get(reverse("home"), {"team": "t0"}).content.decode()
    assert 'data-testid="team-t0"' in page


@pytest.mark.parametrize("persona", ["admin", "auditor"])
def test_admins_and_auditors_see_every_team_and_may_filter(client, people, persona):
    page = page_of(client, people[persona])
    assert 'data-testid="team-t0"' in page and 'data-testid="team-t1"' in page
    assert 'href="/clusters/"' in page and 'data-testid="platform-links"' in page
    only = page_of(client, people[persona], team="t1")
    assert 'data-testid="team-t1"' in only and 'data-testid="team-t0"' not in only
    assert ('data-testid="new-request-t1"' in only) == (persona == "admin")


def test_admins_get_teams_a_page_at_a_time(client, admin):
    grow_world(teams=12, clusters=1, requests_per_team=0, admin=admin)
    first = page_of(client, admin)
    assert first.count('class="card team"') == 10
    second = page_of(client, admin, page=2)
    assert second.count('class="card team"') == 2


def count_queries(client, url) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


@pytest.mark.parametrize("persona", ["admin", "lead-t0", "member-t0"])
def test_queries_do_not_grow_with_teams_clusters_and_requests(client, admin, people, persona):
    client.force_login(people[persona])
    client.get(reverse("home"))  # warm up what is cached once per process
    small = count_queries(client, reverse("home"))
    grow_world(teams=6, clusters=3, requests_per_team=20, admin=admin)
    big = count_queries(client, reverse("home"))
    assert QuotaRequest.objects.count() > 100 and Allocation.objects.count() == 18
    assert small == big
