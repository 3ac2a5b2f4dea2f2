"""Helpers of the single sign-on tests against dex (tests/portal/sso, tests/ui): the dex users,
the portal's settings pointed at a running dex, and the provider's half of the code flow
walked with ``requests`` (its redirects and its password form)."""

from __future__ import annotations

import html
import os
import re
from urllib.parse import urljoin, urlsplit

import pytest
import requests

from controlplane.sso_provider import PASSWORD, DexProvider, DexUser, dex_binary

ENABLE_HINT = "dex not built: `make controlplane` (needs Go 1.26) enables the single sign-on tests"
CALLBACK = "http://testserver/sso/callback/"
ANN = DexUser(
    "ann@example.com",
    "ann",
    "ann-0001",
    ("portal-admins", "team:team-a:lead", "team:team-b:member", "team:no-such-team:lead"),
    name="Ann Lee",
)
BOB = DexUser("bob@example.com", "bob", "bob-0002", ())


def require_dex() -> None:
    """Skips without the dex binary; fails in CI, where it is built first."""
    if dex_binary() is None:
        if os.environ.get("CI"):
            pytest.fail(ENABLE_HINT, pytrace=False)
        pytest.skip(ENABLE_HINT)


def point_portal_at(settings, dex: DexProvider, **more) -> None:
    """The portal's settings pointed at dex, with every kind of role mapped (``more``
    overrides)."""
    values = {
        "OIDC_ISSUER": dex.issuer,
        "SSO_ENABLED": True,
        "OIDC_PROVIDER_NAME": "dex",
        "OIDC_RP_CLIENT_ID": dex.client_id,
        "OIDC_RP_CLIENT_SECRET": dex.client_secret,
        "OIDC_ADMIN_GROUPS": ["portal-admins"],
        "OIDC_AUDITOR_GROUPS": ["portal-auditors"],
        "OIDC_TEAM_LEAD_GROUP": "team:{slug}:lead",
        "OIDC_TEAM_MEMBER_GROUP": "team:{slug}:member",
        "OIDC_LINK_BY_EMAIL": False,
        "PASSWORD_LOGIN": True,
        **more,
    }
    for name, value in values.items():
        setattr(settings, name, value)


def _location(response, base: str) -> str:
    return urljoin(base, response.headers["Location"])


def provider_round_trip(
    start_location: str, email: str, password: str = PASSWORD, *, verify: bool | str = True
) -> str:
    """Follows the provider's redirects and fills its password form; returns the URL it sends
    the browser back to (the portal's callback with code and state)."""
    browser = requests.Session()
    url = start_location
    for _step in range(12):
        if url.startswith("http://testserver/"):
            return url
        response = browser.get(url, allow_redirects=False, timeout=10, verify=verify)
        if response.is_redirect:
            url = _location(response, url)
            continue
        assert response.status_code == 200, (url, response.status_code, response.text[:500])
        form = re.search(r'<form method="post" action="([^"]*)"', response.text)
        assert form, f"no form on the provider's page {url}: {response.text[:500]}"
        post_url = urljoin(url, html.unescape(form[1]))
        response = browser.post(
            post_url,
            data={"login": email, "password": password},
            allow_redirects=False,
            timeout=10,
            verify=verify,
        )
        assert response.is_redirect, f"the provider refused {email}: {response.text[:300]}"
        url = _location(response, post_url)
    raise AssertionError(f"no way back to the portal from {start_location}")


def callback_path(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"
