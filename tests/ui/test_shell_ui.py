"""The UI shell in a real Chromium: nothing wider than a 390 px phone, the header on one screen
width without broken words, the language switch and the skip link by keyboard."""

import pytest
from playwright.sync_api import expect

from portal.tokens import api_token_create

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"width": 390, "height": 844}


def _phone(browser, live_server, locale: str):
    context = browser.new_context(base_url=live_server.url, viewport=PHONE, locale=locale)
    context.set_default_timeout(15_000)
    return context


def _log_in(page, username: str) -> None:
    page.goto("/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "pw")
    page.click("main button[type=submit]")
    page.wait_for_selector(f"[data-testid=current-user]:has-text('{username}')")


def _page_width(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_pages_fit_a_390_px_phone(browser, live_server, plan, admin, lead_a, artifacts, locale):
    # Long names and codes in the token tables, the widest rows these pages have.
    api_token_create(user=lead_a, name="nightly-evaluation-pipeline-of-team-a-" + "x" * 40)
    api_token_create(user=admin, name="a token of the platform admin", days=30)
    context = _phone(browser, live_server, locale)
    page = context.new_page()
    try:
        page.goto("/login/")
        assert _page_width(page) <= PHONE["width"], "login"
        page.screenshot(path=artifacts / f"shell-login-390-{locale}.png", full_page=True)
        _log_in(page, "admin")
        for path in ("/", "/tokens/"):
            page.goto(path)
            name = path.strip("/") or "home"
            page.screenshot(path=artifacts / f"shell-{name}-390-{locale}.png", full_page=True)
            assert _page_width(page) <= PHONE["width"], path
            # The header's buttons and links keep their words whole: one line each.
            heights = page.eval_on_selector_all(
                ".topbar a, .topbar button", "els => els.map(e => e.getBoundingClientRect().height)"
            )
            assert heights and max(heights) < 30, (path, heights)
    finally:
        context.close()


def test_language_switch_and_skip_link_work_by_keyboard(browser, live_server, lead_a):
    context = _phone(browser, live_server, "en-US")
    page = context.new_page()
    try:
        _log_in(page, "lead-a")
        page.goto("/tokens/")
        expect(page.locator("html")).to_have_attribute("lang", "en")

        page.keyboard.press("Tab")  # the first stop: the skip link, shown when focused
        skip = page.locator(".skip-link")
        expect(skip).to_be_focused()
        assert skip.bounding_box()["y"] >= 0
        outline = skip.evaluate("e => getComputedStyle(e).outlineStyle")
        assert outline != "none"
        page.keyboard.press("Enter")
        expect(page.locator("main#content")).to_be_focused()

        switch = page.locator("[data-testid=language-zh-hans]")
        switch.focus()
        page.keyboard.press("Enter")
        page.wait_for_url("**/tokens/")
        expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
        expect(page.locator(".mainnav")).to_contain_text("概览")
        # The choice sticks: the next page is Chinese too.
        page.goto("/")
        expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
        expect(page.locator("[data-testid=language-zh-hans]")).to_be_disabled()
    finally:
        context.close()


def test_favicon_reaches_the_browser(browser, live_server):
    context = _phone(browser, live_server, "en-US")
    page = context.new_page()
    try:
        response = page.goto("/favicon.ico")
        assert response.status == 200
        assert response.headers["content-type"] == "image/x-icon"
        page.goto("/login/")
        icon = page.locator("link[rel=icon][type='image/svg+xml']").get_attribute("href")
        assert page.request.get(icon).status == 200
    finally:
        context.close()
