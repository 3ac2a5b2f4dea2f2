"""Languages of the UI: the browser's Accept-Language picks English or Simplified Chinese, the
header's switch overrides it (a cookie), English when nothing is asked; favicon."""

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders

pytestmark = pytest.mark.django_db

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9,en;q=0.5"}


def _lang(html: str) -> str:
    return re.search(r'<html lang="([^"]+)"', html).group(1)


def test_without_accept_language_pages_are_english(client):
    html = client.get("/login/").content.decode()
    assert _lang(html) == "en"
    assert "<h1>Log in</h1>" in html
    assert "Skip to content" in html


def test_accept_language_zh_cn_gives_chinese(client):
    response = client.get("/login/", **ZH)
    html = response.content.decode()
    assert _lang(html) == "zh-hans"
    assert "<h1>登录</h1>" in html
    assert response["Content-Language"] == "zh-hans"
    assert "Accept-Language" in response["Vary"]


def test_logged_in_navigation_is_translated(client, lead_a):
    client.force_login(lead_a)
    english = client.get("/tokens/").content.decode()
    assert ">Overview</a>" in english and ">API tokens</a>" in english
    chinese = client.get("/tokens/", **ZH).content.decode()
    assert _lang(chinese) == "zh-hans"
    assert ">概览</a>" in chinese and ">退出登录</button>" in chinese
    assert "还没有令牌。" in chinese


def test_a_language_nobody_translated_falls_back_to_english(client):
    html = client.get("/login/", HTTP_ACCEPT_LANGUAGE="fr-FR,fr;q=0.9").content.decode()
    assert _lang(html) == "en"


def test_the_switch_posts_to_set_language_and_sticks(client, lead_a):
    client.force_login(lead_a)
    page = client.get("/tokens/").content.decode()
    # The header's form: a POST to set_language with the current page as next.
    assert 'action="/i18n/setlang/"' in page
    assert 'name="next" value="/tokens/"' in page
    assert 'name="language" value="zh-hans"' in page

    response = client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/tokens/"})
    assert response.status_code == 302
    assert response["Location"] == "/tokens/"
    cookie = response.cookies[settings.LANGUAGE_COOKIE_NAME]
    assert cookie.value == "zh-hans"
    assert cookie["httponly"] and cookie["samesite"] == "Lax"
    # No Accept-Language: the cookie alone picks Chinese, page after page.
    assert _lang(client.get("/tokens/").content.decode()) == "zh-hans"
    assert ">概览</a>" in client.get("/").content.decode()

    # Back to English, even from a browser that asks for Chinese: the choice wins.
    client.post("/i18n/setlang/", {"language": "en", "next": "/tokens/"})
    assert _lang(client.get("/tokens/", **ZH).content.decode()) == "en"


def test_the_switch_refuses_a_next_to_another_site(client):
    response = client.post(
        "/i18n/setlang/", {"language": "zh-hans", "next": "https://evil.example.com/"}
    )
    assert response.status_code == 302
    assert "evil.example.com" not in response["Location"]


def test_the_switch_marks_the_current_language(client):
    html = client.get("/login/", **ZH).content.decode()
    current = re.search(r'<button[^>]*value="zh-hans"[^>]*>', html).group(0)
    other = re.search(r'<button[^>]*value="en"[^>]*>', html).group(0)
    assert 'aria-pressed="true"' in current and "disabled" in current
    assert 'aria-pressed="false"' in other and "disabled" not in other


def test_token_form_errors_and_messages_are_translated(client, lead_a):
    client.force_login(lead_a)
    response = client.post("/tokens/", {"name": "ci", "days": "100000"}, **ZH)
    assert response.status_code == 400
    html = response.content.decode()
    assert "多少天后到期" in html  # the field's help text
    created = client.post("/tokens/", {"name": "ci", "days": "5"}, **ZH).content.decode()
    assert "请立即复制" in created
    row = lead_a.api_tokens.get()
    page = client.post(f"/tokens/{row.pk}/revoke/", follow=True, **ZH).content.decode()
    assert f"令牌 {row.label}（ci）已撤销。" in page  # noqa: RUF001


def test_api_errors_follow_accept_language_and_default_to_english(client):
    english = client.get("/api/v1/teams/")
    chinese = client.get("/api/v1/teams/", **ZH)
    assert english.status_code == chinese.status_code == 401
    assert english.json()["message"] == "Authentication credentials were not provided."
    assert re.search(r"[\u4e00-\u9fff]", chinese.json()["message"])


def test_favicon_ico_is_served_at_the_root(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 200
    assert response["Content-Type"] == "image/x-icon"
    body = b"".join(response.streaming_content)
    assert body == Path(finders.find("favicon.ico")).read_bytes()
    assert body[:4] == b"\x00\x00\x01\x00"  # an ICO file


def test_pages_link_the_svg_and_ico_favicons(client):
    html = client.get("/login/").content.decode()
    assert 'rel="icon" href="/static/favicon.svg" type="image/svg+xml"' in html
    assert 'href="/static/favicon.ico"' in html
    assert client.get("/static/favicon.svg").status_code == 200
