# ruff: noqa: RUF001 - the Chinese messages hold full-width punctuation
"""Refusals in the reader's language: a service's refusal, surfaced through the API, is in
Chinese for ``Accept-Language: zh-Hans`` and in English without the header, while what a client
reads by machine (the status, ``extra.field``, ``extra.code``) is the same in both; the pages
show the same refusals in the page's language."""

import pytest
from rest_framework.test import APIClient

from approvals.lifecycle import request_submit
from tests.support.api import as_user
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-Hans"}


def _line(**values) -> dict:
    return {
        "namespace": "team-c-dev",
        "cluster": "demo",
        "resource": "nvidia.com/gpu",
        "guarantee": "3",
        "cap": "6",
        **values,
    }


def _body(*lines: dict, submit: bool = True) -> dict:
    return {
        "team": "team-c",
        "justification": "nightly evaluation needs one more card",
        "kind": "permanent",
        "lines": list(lines) or [_line()],
        "submit": submit,
    }


def _both(send) -> tuple:
    """The same request without Accept-Language and with zh-Hans."""
    english, chinese = send({}), send(ZH)
    assert english["Content-Language"] == "en"
    assert chinese["Content-Language"] == "zh-hans"
    return english, chinese


def test_a_lifecycle_refusal_follows_accept_language(plan, admin, strict_policy):
    api = as_user(admin)
    created = api.post("/api/v1/requests/", _body(), format="json").json()
    english, chinese = _both(
        lambda headers: api.post(f"/api/v1/requests/{created['id']}/approve/", **headers)
    )
    assert english.status_code == chinese.status_code == 403
    assert english.json() == {
        "message": "nobody approves their own request",
        "extra": {"field": "request"},
    }
    assert chinese.json() == {
        "message": "任何人都不能批准自己的申请",
        "extra": {"field": "request"},
    }


def test_a_not_allowed_refusal_keeps_its_extra(plan, lead_c, strict_policy):
    api = as_user(lead_c)
    created = api.post("/api/v1/requests/", _body(), format="json").json()
    assert api.post(f"/api/v1/requests/{created['id']}/withdraw/").status_code == 200
    english, chinese = _both(
        lambda headers: api.post(f"/api/v1/requests/{created['id']}/rebase/", **headers)
    )
    assert english.status_code == chinese.status_code == 409
    assert english.json()["message"] == (
        f"request #{created['id']} is withdrawn; only drafts and requests waiting for a "
        "decision are rebased"
    )
    # The status label is translated inside the message, the status value in extra is not.
    assert chinese.json()["message"] == (
        f"申请 #{created['id']} 当前为“已撤回”；只有草稿和等待审批的申请可以基于当前配额重新计算"
    )
    assert (
        english.json()["extra"]
        == chinese.json()["extra"]
        == {
            "field": "status",
            "status": "withdrawn",
        }
    )


def test_a_lines_validation_error_follows_accept_language(plan, lead_c, strict_policy):
    api = as_user(lead_c)
    twice = _body(_line(), _line())
    english, chinese = _both(
        lambda headers: api.post("/api/v1/requests/", twice, format="json", **headers)
    )
    assert english.status_code == chinese.status_code == 400
    assert english.json()["message"] == "lines[1]: team-c-dev nvidia.com/gpu appears twice"
    assert chinese.json()["message"] == "lines[1]：team-c-dev nvidia.com/gpu 出现了两次"
    assert english.json()["extra"] == chinese.json()["extra"] == {"field": "lines[1].resource"}


def test_an_allocation_rule_is_translated_under_its_line(plan, lead_c, strict_policy):
    api = as_user(lead_c)
    inverted = _body(_line(guarantee="7", cap="6"))
    english, chinese = _both(
        lambda headers: api.post("/api/v1/requests/", inverted, format="json", **headers)
    )
    assert english.json()["message"] == (
        "lines[0].guarantee: guarantee 7 exceeds cap 6 for team-c-dev nvidia.com/gpu "
        "(guarantee ≤ cap)"
    )
    assert chinese.json()["message"] == (
        "lines[0].guarantee: team-c-dev nvidia.com/gpu 的保障量 7 超过上限 6（要求保障量 ≤ 上限）"
    )
    assert english.json()["extra"] == chinese.json()["extra"] == {"field": "lines[0].guarantee"}


def test_a_token_refusal_follows_accept_language(lead_a):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer gqp_wrong")
    english, chinese = _both(lambda headers: client.get("/api/v1/teams/", **headers))
    assert english.status_code == chinese.status_code == 401
    assert english.json() == {
        "message": "invalid API token",
        "extra": {"code": "authentication_failed"},
    }
    assert chinese.json() == {"message": "API 令牌无效", "extra": {"code": "authentication_failed"}}


def test_a_parser_refusal_follows_accept_language(plan, lead_c):
    api = as_user(lead_c)
    english, chinese = _both(
        lambda headers: api.post(
            "/api/v1/requests/",
            data=b'{"team": "team-c", "justification": "a\\u0000b"}',
            content_type="application/json",
            **headers,
        )
    )
    assert english.status_code == chinese.status_code == 400
    assert english.json()["message"] == "justification: must not contain NUL (\\x00) characters"
    assert chinese.json()["message"] == "justification：不能包含 NUL（\\x00）字符"
    assert (
        english.json()["extra"]
        == chinese.json()["extra"]
        == {
            "field": "justification",
            "code": "invalid_text",
        }
    )


def test_a_paging_refusal_follows_accept_language(plan, lead_c):
    api = as_user(lead_c)
    english, chinese = _both(lambda headers: api.get("/api/v1/requests/?page_size=many", **headers))
    assert english.status_code == chinese.status_code == 400
    assert english.json()["message"] == "page_size: must be a positive integer, got 'many'"
    assert chinese.json()["message"] == "page_size：必须是正整数，实际为 'many'"
    assert (
        english.json()["extra"]
        == chinese.json()["extra"]
        == {
            "field": "page_size",
            "code": "invalid",
        }
    )


def test_a_page_shows_a_refusal_in_chinese(client, plan, admin, gpu, strict_policy):
    request = request_submit(
        request=new_request(admin, plan["team-a"], gpu, 6, 8), acting_user=admin
    )
    client.force_login(admin)
    response = client.post(f"/requests/{request.pk}/approve/", {}, **ZH)
    assert response.status_code == 403
    html = response.content.decode()
    assert "任何人都不能批准自己的申请" in html
    assert "nobody approves their own request" not in html
