"""A real OpenID Connect provider for the single sign-on tests: dex, built by
``make controlplane`` from its Go module, started on a free loopback port with in-memory
storage, one static client whose redirect URI is the Django test client's callback, and static
users (password ``password``) with groups.

Without the built binary these tests are skipped on a developer machine (the header says how to
enable them) and fail in CI, as tests/real do. ``sign_in`` walks the real code flow: the
portal's start view, dex's pages with ``requests``, and the portal's callback, which exchanges
the code with dex and checks the ID token against dex's keys."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from controlplane.sso_provider import PASSWORD, DexProvider, DexUser, dex_binary
from tests.support.sso import (
    ANN,
    BOB,
    CALLBACK,
    ENABLE_HINT,
    callback_path,
    point_portal_at,
    provider_round_trip,
    require_dex,
)


def pytest_report_header(config) -> str | None:
    if dex_binary() is None:
        return f"tests/portal/sso: {ENABLE_HINT}" + (
            " -- required in CI" if os.environ.get("CI") else ""
        )
    return None


@pytest.fixture
def dex(tmp_path) -> Iterator[DexProvider]:
    """dex with ANN and BOB; ``dex.restart(users=[...])`` changes what it knows of them."""
    require_dex()
    provider = DexProvider(tmp_path / "dex", client_redirect_uris=[CALLBACK], users=[ANN, BOB])
    provider.start()
    try:
        yield provider
    finally:
        provider.stop()


@pytest.fixture
def sso(settings, dex, db) -> DexProvider:
    point_portal_at(settings, dex)
    return dex


@pytest.fixture
def sign_in(sso) -> Callable:
    """``sign_in(client, user, next=None)``: the whole code flow; the callback's response."""

    def run(client, user: DexUser, next: str | None = None, password: str = PASSWORD):
        start = client.get("/sso/login/", {"next": next} if next else {})
        assert start.status_code == 302, start.status_code
        assert start["Location"].startswith(sso.issuer), start["Location"]
        back = provider_round_trip(start["Location"], user.email, password)
        return client.get(callback_path(back))

    return run
