"""The audit log page (/audit/): admins and auditors only, as the CSV export; filters by actor,
team, action and time (the export's and the API's FilterSet), newest first 25 a page, readable
times, links to requests, a bad filter named on the page; a fixed number of queries."""

import datetime
import html
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from approvals.models import QuotaRequest
from quotas.audit.chain import audit_record
from quotas.models import AuditEvent, TeamMembership
from tests.support.people import make_user
from tests.support.worlds import grow_world

pytestmark = pytest.mark.django_db
URL = "/audit/"


@pytest.fixture
def world(admin):
    return grow_world(teams=2, clusters=1, requests_per_team=2, admin=admin)


@pytest.fixture
def people(world, admin, auditor):
    users = {"admin": admin, "auditor": auditor}
    for name, team, role in (("lead-t0", 0, "lead"), ("member-t0", 0, "member")):
        users[name] = make_user(name)
        TeamMembership.objects.create(team=world["teams"][team], user=users[name], role=role)
    return users


def get(client, user, params=None, status=200):
    client.force_login(user)
    response = client.get(URL, params or {})
    assert response.status_code == status
    return response.content.decode()


def seqs(page: str) -> list[int]:
    return [int(s) for s in re.findall(r'data-testid="event-(\d+)"', page)]


def test_url_name():
    assert reverse("audit-log") == URL


def test_anonymous_is_sent_to_login(client):
    response = client.get(URL)
    assert response.status_code == 302 and response.url.startswith(reverse("login"))


@pytest.mark.parametrize("persona", ["lead-t0", "member-t0"])
def test_people_of_teams_are_refused_as_by_the_export(client, people, persona):
    client.force_login(people[persona])
    assert client.get(URL).status_code == 403
    assert client.get(reverse("audit-export")).status_code == 403


@pytest.mark.parametrize("persona", ["admin", "auditor"])
def test_admins_and_auditors_read_it_newest_first(client, people, persona):
    page = get(client, people[persona])
    newest = AuditEvent.objects.order_by("-seq")[:25]
    assert seqs(page) == [e.seq for e in newest]
    event = newest[0]
    row = page.split(f'data-testid="event-{event.seq}"', 1)[1].split("</tr>", 1)[0]
    when = datetime.datetime.fromisoformat(re.search(r'<time datetime="([^"]+)">', row).group(1))
    shown = re.search(r">(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)</time>", row).group(1)
    assert shown == when.strftime("%Y-%m-%d %H:%M:%S")  # no microseconds
    assert "Submitted" in row and "admin" in row  # the action's label and the actor


def test_pages_of_25(client, people, admin):
    grow_world(teams=2, clusters=1, requests_per_team=20, admin=admin)
    total = AuditEvent.objects.count()
    assert total > 25
    second = get(client, people["admin"], {"page": 2})
    assert seqs(second) == list(range(total - 25, max(total - 50, 0), -1))


def test_a_request_event_links_to_the_request(client, people, world):
    request = QuotaRequest.objects.filter(team=world["teams"][0], kind="permanent").first()
    page = get(client, people["admin"], {"team": "t0", "action": "request.submitted"})
    assert f'href="/requests/{request.pk}/"' in page


def test_filters_by_actor_team_action_and_time(client, people, world):
    other = make_user("someone")
    t1_request = QuotaRequest.objects.filter(team=world["teams"][1], kind="permanent").first()
    mine = audit_record(acting_user=other, action="request.withdrawn", target=t1_request)

    by_actor = get(client, people["admin"], {"actor": "someone"})
    assert seqs(by_actor) == [mine.seq]

    by_team = get(client, people["admin"], {"team": "t1"})
    team_events = AuditEvent.objects.filter(
        target_type__in=["QuotaRequest", "Allocation"]
    ).order_by("-seq")
    expected = [
        e.seq
        for e in team_events
        if (
            e.target_type == "QuotaRequest"
            and QuotaRequest.objects.get(pk=e.target_id).team.slug == "t1"
        )
        or (e.target_type == "Allocation" and "t1-c0" in e.target_repr)
    ]
    assert seqs(by_team) == expected and mine.seq in expected
    assert "t0-c0" not in by_team

    by_action = get(client, people["admin"], {"action": "allocation.changed"})
    assert seqs(by_action) == list(
        AuditEvent.objects.filter(action="allocation.changed")
        .order_by("-seq")
        .values_list("seq", flat=True)
    )
    assert 'value="allocation.changed" selected' in by_action  # the select keeps the choice

    now = mine.created_at
    future = (now + datetime.timedelta(days=1)).date().isoformat()
    past = (now - datetime.timedelta(days=1)).date().isoformat()
    assert seqs(get(client, people["admin"], {"since": future})) == []
    assert seqs(get(client, people["admin"], {"until": past})) == []
    assert mine.seq in seqs(get(client, people["admin"], {"since": past, "until": future}))


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"since": "last week"}, "since: give a time as ISO 8601"),
        ({"until": "2026-02-30"}, "until: give a time as ISO 8601"),
        ({"since": "2026-02-01", "until": "2026-01-01"}, "until: must not be before since"),
        ({"team": "nope"}, "team: no team 'nope' among the teams you may see"),
        ({"actor": "a b"}, "actor: a user name"),
        ({"action": "x y"}, "action: an action of letters"),
    ],
)
def test_a_bad_filter_is_named_on_the_page(client, people, params, message):
    page = get(client, people["admin"], params, status=400)
    assert 'data-testid="filter-error"' in page and message in html.unescape(page)
    assert 'data-testid="audit-events"' not in page


def test_the_csv_link_carries_the_filters_and_exports_the_same_events(client, people):
    params = {"actor": "admin", "team": "t0", "action": "request.submitted", "since": "2020-01-01"}
    page = get(client, people["admin"], params)
    href = (
        re.search(r'href="([^"]+)" data-testid="export-csv"', page).group(1).replace("&amp;", "&")
    )
    assert urlsplit(href).path == reverse("audit-export")
    assert {k: v[0] for k, v in parse_qs(urlsplit(href).query).items()} == params
    response = client.get(href)
    body = b"".join(response.streaming_content).decode().splitlines()
    exported = [int(line.split(",", 1)[0]) for line in body[1:]]
    assert exported == sorted(seqs(page)) and exported


def test_the_export_refuses_a_bad_team_naming_it(client, people):
    client.force_login(people["auditor"])
    response = client.get(reverse("audit-export"), {"team": "nope"})
    assert response.status_code == 400
    assert b"team: no team 'nope' among the teams you may see" in response.content


def count_queries(client, params) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(URL, params).status_code == 200
    return len(queries)


@pytest.mark.parametrize("params", [{}, {"team": "t0", "action": "request.submitted"}])
def test_queries_do_not_grow_with_the_log(client, people, admin, params):
    client.force_login(people["auditor"])
    client.get(URL, params)
    small = count_queries(client, params)
    grow_world(teams=6, clusters=3, requests_per_team=20, admin=admin)
    assert AuditEvent.objects.count() > 150
    assert count_queries(client, params) == small


def test_the_api_filters_by_team_as_the_page(client, people):
    page = get(client, people["auditor"], {"team": "t1"})
    api = client.get("/api/v1/audit-events/", {"team": "t1", "page_size": 100}).json()
    assert [e["seq"] for e in api["results"]] == seqs(page)
    bad = client.get("/api/v1/audit-events/", {"team": "nope"})
    assert bad.status_code == 400 and bad.json()["extra"]["field"] == "team"


def _row(page: str, seq: int) -> str:
    return page.split(f'data-testid="event-{seq}"', 1)[1].split("</tr>", 1)[0]


def test_targets_read_in_words_with_a_link(client, people, world):
    request = QuotaRequest.objects.filter(team=world["teams"][0]).order_by("pk").first()
    event = AuditEvent.objects.filter(target_type="QuotaRequest", target_id=str(request.pk))[0]
    page = get(client, people["admin"], {"team": "t0", "action": event.action})
    row = _row(page, event.seq)
    # Not "request #1 (3, submitted)" with the team's id, nor the model's name.
    assert f'<a href="/requests/{request.pk}/">request #{request.pk} of t0</a>' in row
    assert "quota request" in row and "QuotaRequest" not in row and "(" not in row.split("</a>")[0]
    allocation = AuditEvent.objects.filter(target_type="Allocation").order_by("-seq")[0]
    row = _row(get(client, people["admin"], {"action": "allocation.changed"}), allocation.seq)
    assert "nvidia.com/gpu of t1-c0 on c0" in row and "allocation" in row


def test_amounts_read_as_on_every_other_page(client, people, world, admin):
    class Legacy:  # what an allocation's event kept before amounts were written plainly
        pk = 999

        def __str__(self) -> str:
            return "c0/t0-c0 nvidia.com/gpu: 2.000/4.000"

    event = audit_record(
        acting_user=admin,
        action="allocation.changed",
        target=Legacy(),
        before={"guarantee": "2.000", "cap": "4.000"},
        after={"guarantee": "2.500", "cap": "4.000", "version": "v1.2.0"},
    )
    row = _row(get(client, people["admin"], {"action": "allocation.changed"}), event.seq)
    assert "nvidia.com/gpu: 2/4" in row and "2.000" not in row
    assert "guarantee: 2 → 2.5" in row and "v1.2.0" in row  # a version is not an amount
    # And what is recorded from now on is written so too.
    allocation = world["teams"][0].namespaces.first().allocations.first()
    assert str(allocation).endswith(": 3/6")
