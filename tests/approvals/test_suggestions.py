"""A suggestion becomes a quota request through request_create / request_submit: from the API
and from the button of the suggestions page; leads of the team and admins only."""

import threading

import pytest
from django.db import connection
from django.test import Client

from approvals.lifecycle import request_withdraw
from approvals.models import QuotaRequest
from approvals.suggestions import request_from_suggestion
from common.amounts import format_amount
from common.errors import NotAllowed
from quotas.models import ClusterCapacity
from tests.support.api import as_user
from tests.support.usage import june_suggestions_create, june_usage_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def june_suggestions(alloc_a, alloc_b, gpu, cluster):
    june_usage_create(alloc_a, alloc_b, gpu)
    return june_suggestions_create(cluster)


def url(suggestion) -> str:
    return f"/api/v1/suggestions/{suggestion.pk}/request/"


def test_a_lead_drafts_a_request_from_a_suggestion(june_suggestions, lead_a):
    s = june_suggestions["team-a-training"]
    response = as_user(lead_a).post(url(s), {}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "draft" and body["team"] == "team-a"
    [line] = body["lines"]
    assert line["current"]["guarantee"] == "6" and line["current"]["cap"] == "10"
    assert line["requested"]["guarantee"] == "2" and line["requested"]["cap"] == "4"
    qr = QuotaRequest.objects.get(pk=body["id"])
    assert "From the portal's suggestion for team-a-training" in qr.justification
    assert "typical daily peak 3" in qr.justification
    assert qr.requested_by == lead_a


def test_submitted_at_once_it_goes_through_approval_like_any_other(
    june_suggestions, lead_a, strict_policy
):
    s = june_suggestions["team-a-training"]
    body = as_user(lead_a).post(url(s), {"submit": True}, format="json").json()
    assert body["status"] == "submitted"


def test_who_may(june_suggestions, member_a, other_team_lead, admin):
    s = june_suggestions["team-a-training"]
    member = as_user(member_a).post(url(s), {}, format="json")
    assert member.status_code == 403 and "team-a" in member.json()["message"]
    assert as_user(other_team_lead).post(url(s), {}, format="json").status_code == 404
    assert as_user(admin).post(url(s), {}, format="json").status_code == 201
    assert as_user(admin).post("/api/v1/suggestions/999999/request/", {}).status_code == 404


def test_a_refused_submission_leaves_nothing_behind(june_suggestions, admin, lead_a):
    b = june_suggestions["team-b-inference"]  # 4/6 -> 6/8
    ClusterCapacity.objects.update(capacity=8)  # a's 6 + b's 6 > 8 since
    before = QuotaRequest.objects.count()
    response = as_user(admin).post(url(b), {"submit": True}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["extra"]["field"] == "guarantee" and "above its capacity 8" in body["message"]
    assert QuotaRequest.objects.count() == before


def test_one_open_request_per_suggestion(june_suggestions, lead_a):
    s = june_suggestions["team-a-training"]
    first = as_user(lead_a).post(url(s), {}, format="json")
    assert first.status_code == 201
    second = as_user(lead_a).post(url(s), {}, format="json")
    assert second.status_code == 409
    body = second.json()
    assert body["extra"] == {
        "field": "suggestion",
        "request": first.json()["id"],
        "request_status": "draft",
    }
    assert f"#{first.json()['id']}" in body["message"]
    # Once that request is withdrawn, the suggestion may be requested again.
    earlier = QuotaRequest.objects.get(pk=first.json()["id"])
    request_withdraw(request=earlier, acting_user=lead_a)
    assert as_user(lead_a).post(url(s), {}, format="json").status_code == 201


@pytest.mark.django_db(transaction=True)
def test_two_clicks_at_once_make_one_request(lead_a, alloc_a, alloc_b, gpu, cluster):
    if connection.vendor != "postgresql":
        pytest.skip("row locks need PostgreSQL")
    june_usage_create(alloc_a, alloc_b, gpu)
    s = june_suggestions_create(cluster)["team-a-training"]
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def click() -> None:
        try:
            barrier.wait()
            request_from_suggestion(suggestion=s, acting_user=lead_a, submit=False)
            outcomes.append("made")
        except NotAllowed:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=click) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["made", "refused"]
    assert QuotaRequest.objects.filter(suggestion=s).count() == 1


def test_the_page_asks_first_then_posts_with_csrf_and_shows_the_request(june_suggestions, lead_a):
    s = june_suggestions["team-a-training"]
    client = Client(enforce_csrf_checks=True)
    client.force_login(lead_a)
    listing = client.get("/suggestions/").content.decode()
    # The list links to the question; it has no button that makes a request.
    assert f'data-testid="review-{s.pk}"' in listing
    assert 'method="post"' not in listing.split('data-testid="suggestions"')[1]
    page = client.get(f"/requests/from-suggestion/{s.pk}/")
    assert page.status_code == 200
    assert not QuotaRequest.objects.exists()  # asking made nothing
    assert client.post(f"/requests/from-suggestion/{s.pk}/", {"submit": "0"}).status_code == 403
    token = page.cookies["csrftoken"].value
    response = client.post(
        f"/requests/from-suggestion/{s.pk}/", {"submit": "0", "csrfmiddlewaretoken": token}
    )
    qr = QuotaRequest.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/requests/{qr.pk}/"
    assert qr.status == "draft"


def test_the_page_refuses_members_and_hides_other_teams(june_suggestions, member_a, lead_a):
    s, other = june_suggestions["team-a-training"], june_suggestions["team-b-inference"]
    client = Client()
    client.force_login(member_a)
    assert f'data-testid="review-{s.pk}"' not in client.get("/suggestions/").content.decode()
    assert client.get(f"/requests/from-suggestion/{s.pk}/").status_code == 403
    assert client.post(f"/requests/from-suggestion/{s.pk}/", {"submit": "1"}).status_code == 403
    client.force_login(lead_a)
    assert client.post(f"/requests/from-suggestion/{other.pk}/").status_code == 404
    assert client.get(f"/requests/from-suggestion/{other.pk}/").status_code == 404
    assert client.put(f"/requests/from-suggestion/{s.pk}/").status_code == 405
    assert not QuotaRequest.objects.exists()


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_the_question_shows_what_changes_and_who_approves(june_suggestions, lead_a, language):
    s = june_suggestions["team-a-training"]
    client = Client(HTTP_ACCEPT_LANGUAGE=language)
    client.force_login(lead_a)
    body = client.get(f"/requests/from-suggestion/{s.pk}/").content.decode()
    was, now = format_amount(s.current_guarantee), format_amount(s.suggested_guarantee)
    guarantee = f"{was} → <strong>{now}</strong>"
    cap = f"{format_amount(s.current_cap)} → <strong>{format_amount(s.suggested_cap)}</strong>"
    assert guarantee in body and cap in body
    assert 'data-testid="impact-policy"' in body
    assert 'data-testid="confirm-draft"' in body
    if language == "zh-hans":
        assert "<h1>根据建议提出申请</h1>" in body
    assert not QuotaRequest.objects.exists()


def test_a_suggestion_already_requested_is_refused_on_the_question_with_nothing_to_press(
    june_suggestions, lead_a
):
    s = june_suggestions["team-a-training"]
    request_from_suggestion(suggestion=s, acting_user=lead_a, submit=False)
    client = Client()
    client.force_login(lead_a)
    body = client.get(f"/requests/from-suggestion/{s.pk}/").content.decode()
    # The draft check does not know the suggestion: the POST refuses a second request.
    response = client.post(f"/requests/from-suggestion/{s.pk}/", {"submit": "0"})
    assert response.status_code == 302
    assert QuotaRequest.objects.filter(suggestion=s).count() == 1
    assert 'data-testid="suggestion-confirm"' in body


def test_the_flags_read_as_words(june_suggestions, lead_a):
    from usage.models import Suggestion

    s = june_suggestions["team-a-training"]
    Suggestion.objects.filter(pk=s.pk).update(flags=["capped_by_share", "no_data"])
    client = Client(HTTP_ACCEPT_LANGUAGE="en")
    client.force_login(lead_a)
    body = client.get("/suggestions/").content.decode()
    assert "cap held at the cluster&#x27;s share" in body and "no usage data" in body
    assert "capped_by_share" not in body and ">no_data<" not in body
