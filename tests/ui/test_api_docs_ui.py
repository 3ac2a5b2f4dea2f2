"""The API docs page (/api/docs/) in a real browser under the portal's Content-Security-Policy:
Swagger UI loads from the portal's own static files, renders every operation of the schema,
and a lead tries one out with their session (no CSP violation, no request to another origin)."""

import json
from urllib.parse import urlparse

import pytest
from playwright.sync_api import expect

from tests.support.browser import watch_csp
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_docs_page_renders_every_operation_without_a_csp_violation(
    open_session, live_server, artifacts, plan, gpu, lead_c
):
    mine = new_request(lead_c, plan["team-c"], gpu, 2, 5)
    page = open_session("lead-c")
    violations = watch_csp(page)
    origins = set()
    page.on("request", lambda r: origins.add(urlparse(r.url).netloc))

    # Found from the portal itself: the main navigation and the tokens page link to it.
    page.goto("/tokens/")
    expect(page.get_by_test_id("tokens-api-docs")).to_have_attribute("href", "/api/docs/")
    page.get_by_test_id("nav-api-docs").click()
    expect(page).to_have_url(f"{live_server.url}/api/docs/")
    response = page.goto("/api/docs/")
    assert response.headers["content-security-policy"].startswith("default-src 'self'")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("GPU quota portal API")
    schema = json.loads(page.request.get("/api/schema/?format=json").text())
    count = sum(len(ops) for ops in schema["paths"].values())
    expect(page.locator(".opblock")).to_have_count(count)
    page.screenshot(path=str(artifacts / "api-docs.png"), full_page=False)

    # Try one out: the list of requests, with the browser's session.
    block = page.locator("#operations-requests-requests_list")
    block.locator(".opblock-summary").click()
    block.locator("button.try-out__btn").click()
    block.locator("button.execute").click()
    live = block.locator(".live-responses-table")
    expect(live.locator("tbody .response-col_status")).to_contain_text("200")
    expect(live).to_contain_text(f'"id": {mine.pk}')
    page.screenshot(path=str(artifacts / "api-docs-try-out.png"), full_page=False)

    assert origins == {urlparse(live_server.url).netloc}, origins  # nothing from a CDN
    assert violations == []
