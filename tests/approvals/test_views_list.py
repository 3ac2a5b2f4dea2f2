"""The request list as the admins' queue: filters of the API's FilterSet (cluster, team, status,
age), sorting, counts per status, pages, requests that no longer fit the plan marked with
the reason, and clear messages for bad filter values. Who sees which rows."""

import html
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from approvals.lifecycle import request_create, request_submit
from approvals.lines import LineInput
from approvals.models import QuotaRequest
from approvals.views import list as views_list
from quotas.models import Cluster, ClusterCapacity, TeamMembership, TeamNamespace
from quotas.services import allocation_set
from tests.support.people import make_user
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db
S = QuotaRequest.Status


def rows(response) -> list[int]:
    return [int(i) for i in re.findall(r'data-testid="request-(\d+)"', response.content.decode())]


def submitted_days_ago(request: QuotaRequest, days: int) -> QuotaRequest:
    QuotaRequest.objects.filter(pk=request.pk).update(
        submitted_at=timezone.now() - timedelta(days=days)
    )
    return request


@pytest.fixture
def other_cluster(gpu):
    cluster = Cluster.objects.create(name="other")
    ClusterCapacity.objects.create(cluster=cluster, resource=gpu, capacity=Decimal(8))
    return cluster


@pytest.fixture
def queue(plan, lead_c, lead_a, other_team_lead, gpu, strict_policy, other_cluster, admin):
    """team-c waiting 10 days, team-a waiting 2 days (on the other cluster), team-b's draft."""
    old = submitted_days_ago(
        request_submit(request=new_request(lead_c, plan["team-c"], gpu, 3, 5), acting_user=lead_c),
        10,
    )
    ns = TeamNamespace.objects.create(
        team=plan["team-a"].team, cluster=other_cluster, name="team-a-other"
    )
    recent = submitted_days_ago(
        request_create(
            team=ns.team,
            acting_user=lead_a,
            justification="a second site",
            lines=[LineInput(ns.pk, gpu.pk, 1, 2)],
            submit=True,
        ),
        2,
    )
    draft = new_request(other_team_lead, plan["team-b"], gpu, 4, 5)
    return {"old": old, "recent": recent, "draft": draft}


# --- filters, sorting, counts -------------------------------------------------------------------


def test_the_pending_queue_is_oldest_submitted_first_and_sorts_on_request(client, queue, admin):
    client.force_login(admin)
    old, recent = queue["old"].pk, queue["recent"].pk
    assert rows(client.get("/requests/?status=submitted")) == [old, recent]
    assert rows(client.get("/requests/?waiting=on")) == [old, recent]
    assert rows(client.get("/requests/?status=submitted&ordering=-submitted")) == [recent, old]
    everyone = rows(client.get("/requests/?ordering=team"))
    assert everyone == [recent, queue["draft"].pk, old]  # team-a, team-b, team-c
    # By cluster: demo before other; the never-submitted draft sorts last by age either way.
    assert rows(client.get("/requests/?ordering=cluster,submitted")) == [
        old,
        queue["draft"].pk,
        recent,
    ]
    assert rows(client.get("/requests/?ordering=-submitted"))[-1] == queue["draft"].pk
    # Anything else: newest created first.
    assert rows(client.get("/requests/")) == [queue["draft"].pk, recent, old]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("older_than=5", ["old"]),
        ("older_than=1", ["old", "recent"]),
        ("team=team-a", ["recent"]),
        ("cluster=other", ["recent"]),
        ("cluster=demo&status=draft", ["draft"]),
    ],
)
def test_filters_by_age_team_cluster_and_status(client, queue, admin, query, expected):
    client.force_login(admin)
    assert set(rows(client.get(f"/requests/?{query}"))) == {queue[k].pk for k in expected}


def test_submitted_before_a_day(client, queue, admin):
    client.force_login(admin)
    day = (timezone.localdate() - timedelta(days=5)).isoformat()
    assert rows(client.get(f"/requests/?submitted_before={day}")) == [queue["old"].pk]


def test_the_age_filters_are_the_apis_too(client, queue, admin):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(admin)
    body = api.get("/api/v1/requests/", {"older_than": "5"}).json()
    assert [r["id"] for r in body["results"]] == [queue["old"].pk]
    body = api.get("/api/v1/requests/", {"ordering": "submitted", "status": "submitted"}).json()
    assert [r["id"] for r in body["results"]] == [queue["old"].pk, queue["recent"].pk]
    refused = api.get("/api/v1/requests/", {"older_than": "-1"})
    assert refused.status_code == 400 and refused.json()["message"] == (
        "older_than: give 0 days or more"
    )


def test_counts_per_status_follow_the_other_filters(client, queue, admin):
    client.force_login(admin)
    page = client.get("/requests/").content.decode()
    assert re.search(r'data-testid="count-all"[^>]*>All <span class="count">3<', page)
    assert re.search(r'data-testid="count-submitted"[^>]*>submitted <span class="count">2<', page)
    assert re.search(r'data-testid="count-draft"[^>]*>draft <span class="count">1<', page)
    narrowed = client.get("/requests/?team=team-c&status=draft").content.decode()
    # The tabs count team-c's requests whatever the status chosen; the chosen one is marked.
    assert re.search(
        r'data-testid="count-submitted"[^>]*>submitted <span class="count">1<', (narrowed)
    )
    assert 'data-testid="count-draft"' not in narrowed
    assert 'href="?team=team-c&amp;status=submitted"' in narrowed
    chosen = client.get("/requests/?status=submitted").content.decode()
    assert 'data-testid="count-submitted" aria-current="page"' in chosen


def test_a_request_with_several_lines_on_the_cluster_is_listed_and_counted_once(
    client, queue, admin, lead_a, gpu, other_cluster
):
    team = queue["recent"].team
    spaces = [
        TeamNamespace.objects.create(team=team, cluster=other_cluster, name=f"team-a-site-{i}")
        for i in (1, 2)
    ]
    both = request_create(
        team=team,
        acting_user=lead_a,
        justification="two sites at once",
        lines=[LineInput(ns.pk, gpu.pk, 1, 1) for ns in spaces],
        submit=True,
    )
    client.force_login(admin)
    page = client.get("/requests/?cluster=other")
    assert sorted(rows(page)) == sorted([queue["recent"].pk, both.pk])
    html = page.content.decode()
    assert re.search(r'data-testid="count-all"[^>]*>All <span class="count">2<', html)
    assert re.search(r'data-testid="count-submitted"[^>]*>submitted <span class="count">2<', html)
    listed = client.get("/api/v1/requests/?cluster=other").json()
    assert listed["count"] == 2
    assert sorted(r["id"] for r in listed["results"]) == sorted([queue["recent"].pk, both.pk])


def test_pages_keep_the_filters(client, queue, admin, monkeypatch):
    monkeypatch.setattr(views_list, "PAGE_SIZE", 1)
    client.force_login(admin)
    first = client.get("/requests/?status=submitted")
    assert rows(first) == [queue["old"].pk]
    page = first.content.decode()
    assert 'href="?status=submitted&amp;page=2" rel="next"' in page
    assert "page 1 of 2 (2 requests)" in page
    assert rows(client.get("/requests/?status=submitted&page=2")) == [queue["recent"].pk]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("older_than=-1", "older_than: give 0 days or more"),
        ("older_than=soon", "older_than: give a whole number of days"),
        ("older_than=99999999999999999999", "older_than: give at most 3650 days"),
        ("submitted_before=yesterday", "submitted_before: give a day as YYYY-MM-DD"),
        ("ordering=oldest", "ordering: 'oldest' is not one of submitted, -submitted"),
        ("cluster=nowhere", "cluster: no cluster named 'nowhere'"),
        ("status=pending", "status: 'pending' is not one of draft"),
    ],
)
def test_bad_filter_values_are_a_message_on_the_page(client, queue, admin, query, message):
    client.force_login(admin)
    response = client.get(f"/requests/?{query}")
    assert response.status_code == 400
    errors = re.findall(r'data-testid="filter-error">([^<]*)<', response.content.decode())
    assert errors and html.unescape(errors[0]).startswith(message)
    assert rows(response) == []  # nothing shown until the filters are fixed


# --- requests that no longer fit --------------------------------------------------------------


def test_a_waiting_request_that_no_longer_fits_is_marked_with_the_reason(
    client, plan, lead_c, gpu, admin, strict_policy
):
    waiting = request_submit(
        request=new_request(lead_c, plan["team-c"], gpu, 6, 8), acting_user=lead_c
    )
    fitting = request_submit(
        request=new_request(lead_c, plan["team-c"], gpu, 2, 5), acting_user=lead_c
    )
    # Since then team-b was given more: 6 + 5 + 6 would be 17 of 16.
    allocation_set(
        team_namespace=plan["team-b"], resource=gpu, guarantee=5, cap=6, acting_user=admin
    )
    client.force_login(admin)
    page = client.get("/requests/?status=submitted").content.decode()
    assert f'data-testid="does-not-fit-{waiting.pk}"' in page
    assert f'data-testid="does-not-fit-{fitting.pk}"' not in page
    assert (
        "No longer fits the plan:</strong> guarantees on cluster demo would sum to 17 "
        "nvidia.com/gpu, above its capacity 16"
    ) in page


# --- who sees what ----------------------------------------------------------------------------


@pytest.fixture
def member_c(plan):
    user = make_user("member-c")
    TeamMembership.objects.create(
        team=plan["team-c"].team, user=user, role=TeamMembership.Role.MEMBER
    )
    return user


@pytest.mark.parametrize(
    ("who", "sees"),
    [
        ("admin", {"old", "recent", "draft"}),
        ("auditor", {"old", "recent", "draft"}),
        ("lead_c", {"old"}),
        ("member_c", {"old"}),
        ("other_team_lead", {"draft"}),
    ],
)
def test_who_sees_which_rows(client, request, queue, member_c, who, sees):
    client.force_login(request.getfixturevalue(who))
    response = client.get("/requests/")
    assert response.status_code == 200
    assert set(rows(response)) == {queue[k].pk for k in sees}
    # The counts are of the visible requests only.
    assert re.search(
        rf'data-testid="count-all"[^>]*>All <span class="count">{len(sees)}<',
        response.content.decode(),
    )


def test_what_the_user_typed_comes_back_escaped_once(client, queue, admin):
    client.force_login(admin)
    page = client.get("/requests/?ordering=<b>x</b>&older_than=<i>").content.decode()
    assert "<b>x</b>" not in page and "<i>" not in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "&amp;lt;" not in page


def test_a_lead_filtering_on_a_team_of_others_gets_a_message(client, queue, lead_c):
    client.force_login(lead_c)
    response = client.get("/requests/?team=team-a")
    assert response.status_code == 400
    assert "team: no team 'team-a' among the teams you may see" in html.unescape(
        response.content.decode()
    )


def test_anonymous_is_sent_to_login(client, queue):
    response = client.get("/requests/?status=submitted")
    assert response.status_code == 302 and response.url.startswith("/login/")


def test_tables_scroll_and_every_filter_is_labelled(client, queue, admin):
    client.force_login(admin)
    page = client.get("/requests/").content.decode()
    assert re.search(
        r'<div class="table-scroll">\s*<table class="stack" data-testid="requests">', page
    )
    for name in (
        "status",
        "team",
        "cluster",
        "kind",
        "created_after",
        "created_before",
        "submitted_before",
        "older_than",
        "ordering",
    ):
        assert f'<label for="id_{name}">' in page
