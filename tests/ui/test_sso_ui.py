"""Single sign-on in a real Chromium against a real provider (dex on loopback): the login
page's button, dex's own password page, and back signed in with the provider's roles; then the
logout. Without the dex binary: skipped, and failed in CI (tests/portal/sso/conftest.py)."""

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from controlplane.sso_provider import PASSWORD, DexProvider, DexUser
from quotas.models import Team
from quotas.roles import is_platform_admin
from tests.support.sso import point_portal_at, require_dex

pytestmark = pytest.mark.django_db(transaction=True)

CAROL = DexUser("carol@example.com", "carol", "carol-0003", ("portal-admins", "team:team-a:lead"))


@pytest.fixture
def dex_for_live_server(live_server, settings, tmp_path):
    require_dex()
    dex = DexProvider(
        tmp_path / "dex", client_redirect_uris=[live_server.url + "/sso/callback/"], users=[CAROL]
    )
    dex.start()
    point_portal_at(settings, dex, PASSWORD_LOGIN=False)
    try:
        yield dex
    finally:
        dex.stop()


def test_sign_in_with_the_provider_and_out(browser, live_server, dex_for_live_server):
    Team.objects.create(slug="team-a", name="Team A")
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        page.goto("/requests/")
        expect(page.locator("#id_password")).to_have_count(0)  # passwords are off
        page.click("[data-testid=sso-login]")
        page.wait_for_url(f"{dex_for_live_server.issuer}/**")
        page.fill("#login", CAROL.email)
        page.fill("#password", PASSWORD)
        page.click("#submit-login")
        expect(page.locator("[data-testid=current-user]")).to_have_text("carol")
        assert page.url == live_server.url + "/requests/"  # back where the sign-in began
        assert is_platform_admin(User.objects.get(username="carol"))

        page.click("header button:has-text('Log out')")
        page.wait_for_url(f"{live_server.url}/login/")
        expect(page.locator("[data-testid=current-user]")).to_have_count(0)
    finally:
        context.close()
