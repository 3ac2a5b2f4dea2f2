"""A costly page's main part is shown again while nothing it depends on changed, and never
after: a committed write, another user, language or query, the next time slot."""

import os
from unittest import mock

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from approvals.models import QuotaRequest
from common import pagecache
from common.pagecache import kept_content
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _postgresql():
    if connection.vendor != "postgresql":
        message = "pages are kept under PostgreSQL's data version (SQLite keeps none)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def _visit(client, url="/requests/", **headers):
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, **headers)
    assert response.status_code == 200
    page = response.content.decode()
    # The main part (the header has a fresh CSRF token each time).
    return page[page.index("<main") : page.index("</main>")], len(queries)


@pytest.fixture
def lead(client, plan, lead_a, strict_policy):
    client.force_login(lead_a)
    return lead_a


def test_the_same_page_is_shown_again_without_computing_it(client, lead):
    first, computed = _visit(client)
    again, kept = _visit(client)
    assert again == first
    assert kept < computed  # the list, its counts and the plan check were not read again
    assert kept <= 4  # session, user, version (and the header's own reads)


def test_a_committed_change_shows_at_once(client, lead, plan, gpu):
    before, _ = _visit(client)
    assert "team-a-training" not in before
    new_request(lead, plan["team-a"], gpu, 7, 10)
    after, _ = _visit(client)
    assert "team-a-training" in after
    QuotaRequest.objects.update(justification="changed")  # no signal, no save(): still seen
    request = QuotaRequest.objects.get()
    QuotaRequest.objects.filter(pk=request.pk).update(status=QuotaRequest.Status.WITHDRAWN)
    withdrawn, _ = _visit(client)
    assert withdrawn != after
    assert 'data-testid="count-withdrawn"' in withdrawn


def test_each_user_gets_their_own(client, plan, lead_a, other_team_lead, gpu, strict_policy):
    new_request(lead_a, plan["team-a"], gpu, 7, 10)
    client.force_login(lead_a)
    mine, _ = _visit(client)
    assert "team-a-training" in mine
    client.force_login(other_team_lead)
    theirs, _ = _visit(client)
    assert "team-a-training" not in theirs


def test_language_and_query_are_part_of_what_is_asked(client, lead):
    english, _ = _visit(client, HTTP_ACCEPT_LANGUAGE="en")
    chinese, _ = _visit(client, HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "Quota requests" in english and "Quota requests" not in chinese
    filtered, _ = _visit(client, "/requests/?status=approved", HTTP_ACCEPT_LANGUAGE="en")
    assert filtered != english


def test_the_next_time_slot_computes_it_again(client, lead):
    _, computed = _visit(client)
    _, kept = _visit(client)
    assert kept < computed
    with mock.patch.object(pagecache.time, "time", return_value=pagecache.time.time() + 120):
        _, later = _visit(client)
    assert later == computed


def test_not_kept_inside_a_transaction_nor_when_turned_off(client, lead, settings):
    _, computed = _visit(client)
    with transaction.atomic():
        _, inside = _visit(client)
    assert inside == computed - 1  # all but the version, which is not read
    settings.PORTAL_PAGE_CACHE_SECONDS = 0
    _, off = _visit(client)
    assert off == computed - 1


def test_a_part_with_a_csrf_token_is_never_kept(rf, admin):
    request = rf.get("/requests/")
    request.user = admin
    calls = []

    def compute():
        calls.append(1)
        return '<input type="hidden" name="csrfmiddlewaretoken" value="x">', 200

    kept_content(request, "form", compute)
    kept_content(request, "form", compute)
    assert len(calls) == 2


def test_a_cache_that_fails_only_costs_the_computation(client, lead):
    first, _ = _visit(client)
    with (
        mock.patch.object(pagecache.cache, "get", side_effect=ConnectionError("down")),
        mock.patch.object(pagecache.cache, "set", side_effect=ConnectionError("down")),
    ):
        again, _ = _visit(client)
    assert again == first


@pytest.mark.parametrize("url", ["/", "/clusters/", "/clusters/demo/", "/summary/", "/audit/"])
def test_every_kept_page_shows_a_change_at_once(client, plan, admin, gpu, url):
    from quotas.services import allocation_set

    client.force_login(admin)
    before, computed = _visit(client, url)
    again, kept = _visit(client, url)
    assert again == before and kept < computed
    allocation_set(
        team_namespace=plan["team-b"], resource=gpu, guarantee=5, cap=7, acting_user=admin
    )
    after, recomputed = _visit(client, url)
    assert after != before
    assert recomputed > kept
