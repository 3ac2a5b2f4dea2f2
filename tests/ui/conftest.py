"""A real headless Chromium (Debian package) driven by Playwright, against pytest-django's
live_server. No pytest-playwright plugin: the browser is launched here by path, since
`playwright install` cannot download browsers on these machines."""

import contextlib
import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("PORTAL_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-dev-shm-usage",
]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


@pytest.fixture(scope="session")
def browser():
    # In CI a missing browser is a broken machine: fail. On a developer's bare machine (the
    # README's "only Python") the UI tests are skipped with the one command that enables them.
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        message = (
            f"Chromium not found at {CHROMIUM}: install the Debian package "
            "(apt-get install -y --no-install-recommends chromium) or set PORTAL_CHROMIUM"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: pip install playwright==1.65.2", pytrace=False)
    from playwright.sync_api import expect

    # Assertions wait as long as actions do (the contexts' 15 s): a loaded CI machine answers
    # a form post slower than Playwright's default 5 s.
    expect.set_options(timeout=15_000)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()


@pytest.fixture
def open_session(browser, live_server):
    """open_session(username) -> a page of its own browser context, logged in as username."""
    contexts = []

    def open_as(username: str):
        context = browser.new_context(
            base_url=live_server.url, viewport={"width": 1280, "height": 900}
        )
        context.set_default_timeout(15_000)
        contexts.append(context)
        page = context.new_page()
        page.goto("/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", "pw")  # every persona of tests.conftest.make_user
        page.click("main button[type=submit]")  # the header has buttons too (language)
        page.wait_for_selector(f"[data-testid=current-user]:has-text('{username}')")
        return page

    yield open_as
    from playwright.sync_api import Error as PlaywrightError

    for context in contexts:
        # A live check the page sent last (typing, then submit) may still be answered by the
        # server: wait for it, or it would touch the database after the test has ended.
        for page in context.pages:
            with contextlib.suppress(PlaywrightError):
                page.wait_for_load_state("networkidle", timeout=10_000)
        context.close()


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
