"""Refused and unknown addresses answer in the portal's frame (navigation, stylesheet, the
language switch), in the reader's language, with the reason the view refused with, and
never with the URL resolver's list of patterns or a model's name."""

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

AUDIT_REFUSAL = {
    "en": "Only platform admins and auditors may read the audit log.",
    "zh-hans": "只有平台管理员和审计员可以查看审计日志。",
}


def _client(user, language: str) -> Client:
    client = Client(HTTP_ACCEPT_LANGUAGE=language)
    if user is not None:
        client.force_login(user)
    return client


def _page(response) -> str:
    body = response.content.decode()
    assert response["Content-Type"].startswith("text/html")
    assert 'data-testid="error-page"' in body
    assert "portal/portal.css" in body
    assert 'data-testid="language-switch"' in body
    return body


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_a_refused_page_says_why_in_the_readers_language(lead_a, language):
    response = _client(lead_a, language).get("/audit/")
    assert response.status_code == 403
    body = _page(response)
    reason = AUDIT_REFUSAL[language]
    assert f'data-testid="error-reason">{reason}<' in body
    assert ("不允许" if language == "zh-hans" else "Not allowed") in body
    # The signed-in person keeps the navigation and a way on.
    assert 'class="mainnav"' in body
    assert 'href="/"' in body


def test_the_audit_export_refuses_with_the_same_frame(lead_a):
    response = _client(lead_a, "en").get("/audit/export.csv")
    assert response.status_code == 403
    assert "may export the audit log" in _page(response)


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_an_unknown_address_is_a_page_not_the_resolvers_list(lead_a, language):
    response = _client(lead_a, language).get("/no-such-page/")
    assert response.status_code == 404
    body = _page(response)
    text = "此地址没有页面。" if language == "zh-hans" else "There is no page at this address."
    assert text in body
    assert "tried" not in body and "Resolver404" not in body and "urlpatterns" not in body


def test_a_cluster_that_does_not_exist_is_named(lead_a):
    response = _client(lead_a, "en").get("/clusters/atlantis/")
    assert response.status_code == 404
    assert "No cluster named atlantis." in _page(response)


def test_markup_in_the_address_is_never_echoed(lead_a):
    response = _client(lead_a, "en").get("/clusters/%3Cb%3Ex/")
    assert response.status_code == 404
    body = _page(response)
    assert "There is no page at this address." in body
    assert "<b>" not in body


def test_someone_not_signed_in_is_offered_the_sign_in(db):
    response = _client(None, "en").get("/no-such-page/")
    assert response.status_code == 404
    body = _page(response)
    assert 'class="mainnav"' not in body
    assert 'href="/login/?next=/no-such-page/"' in body


def test_a_request_of_another_team_is_not_found_without_saying_more(lead_a, plan, gpu, admin):
    from approvals.lifecycle import request_create
    from approvals.lines import LineInput

    ns = plan["team-c"]
    hidden = request_create(
        team=ns.team,
        acting_user=admin,
        justification="not yours",
        lines=[LineInput(ns.pk, gpu.pk, 0, 1)],
    )
    response = _client(lead_a, "en").get(f"/requests/{hidden.pk}/")
    assert response.status_code == 404
    body = _page(response)
    assert "No such request among those you may see." in body
    assert "not yours" not in body
