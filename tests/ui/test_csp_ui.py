"""The UI under its Content-Security-Policy, in a real browser: no page breaks a rule (any CSP
violation fails the test), the request form's script still works from its static file, and a
user makes, uses and revokes an API token on the tokens page."""

import re

import pytest
import requests
from playwright.sync_api import expect

from approvals.models import QuotaRequest
from portal.models import ApiToken
from tests.support.browser import wait_until_settled, watch_csp

pytestmark = pytest.mark.django_db(transaction=True)


def test_no_page_violates_the_content_security_policy(
    open_session, live_server, plan, lead_c, admin, gpu, strict_policy
):
    lead = open_session("lead-c")
    lead_violations = watch_csp(lead)
    assert lead.request.get("/login/").headers["content-security-policy"].startswith("default-src")
    for url in ("/", "/requests/", "/tokens/"):
        lead.goto(url)
        wait_until_settled(lead)

    # The request form's script runs from its file: choosing a line fills in its current values.
    lead.goto("/requests/new/")
    lead.select_option("#id_team", label="team-c")
    row = lead.locator("[data-testid=line-0]")
    row.locator("select[name=lines-0-team_namespace]").select_option(label="team-c-dev (demo)")
    row.locator("select[name=lines-0-resource]").select_option(label="A100 card (nvidia.com/gpu)")
    expect(row.locator("[data-current]")).to_have_text("2 / 4")
    rows = lead.locator("tr.line-row").count()
    lead.click("#add-line")
    expect(lead.locator("tr.line-row")).to_have_count(rows + 1)
    row.locator("input[name=lines-0-guarantee]").fill("3")
    row.locator("input[name=lines-0-cap]").fill("6")
    lead.fill("#id_justification", "one more card")
    lead.click("[data-testid=submit]")
    expect(lead.locator("[data-testid=status]")).to_have_text("submitted")
    request_id = int(re.search(r"/requests/(\d+)/", lead.url).group(1))

    admin_page = open_session("admin")
    admin_violations = watch_csp(admin_page)
    for url in (
        f"/requests/{request_id}/",
        "/admin/",
        "/admin/approvals/quotarequest/",
        f"/admin/approvals/quotarequest/{request_id}/change/",
        "/admin/quotas/cluster/",
        "/admin/axes/accessattempt/",
        "/tokens/",
    ):
        admin_page.goto(url)
        wait_until_settled(admin_page)
    assert QuotaRequest.objects.filter(pk=request_id).exists()
    assert lead_violations == [] and admin_violations == []


def test_a_lead_makes_uses_and_revokes_a_token_in_the_browser(
    open_session, live_server, artifacts, plan, lead_c
):
    lead = open_session("lead-c")
    violations = watch_csp(lead)
    lead.click("text=API tokens")
    expect(lead.locator("[data-testid=own-tokens]")).to_contain_text("No tokens yet.")
    lead.fill("#id_name", "nightly-ci")
    expect(lead.locator("#id_days")).to_have_value("90")
    lead.click("[data-testid=create-token-submit]")
    token = lead.locator("[data-testid=new-token-value]").inner_text().strip()
    lead.screenshot(path=str(artifacts / "token-created.png"), full_page=True)
    row = ApiToken.objects.get(user=lead_c)
    assert token.startswith(f"gqp_{row.public_id}_")

    api = f"{live_server.url}/api/v1/teams/"
    headers = {"Authorization": f"Bearer {token}"}
    assert requests.get(api, headers=headers, timeout=10).status_code == 200

    lead.goto("/tokens/")
    listed = lead.locator(f"[data-testid=token-{row.pk}]")
    expect(listed).to_contain_text(row.label)
    expect(listed).to_contain_text("active")
    assert token not in lead.content()  # shown once
    lead.click(f"[data-testid=revoke-{row.pk}]")
    expect(lead.locator(f"[data-testid=token-{row.pk}]")).to_contain_text("revoked")
    lead.screenshot(path=str(artifacts / "token-revoked.png"), full_page=True)
    assert requests.get(api, headers=headers, timeout=10).status_code == 401
    assert violations == []
