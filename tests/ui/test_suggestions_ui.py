"""In a real browser, offline: the usage page draws its plotly charts from the portal's own
static files, and a lead turns a suggestion into a request after seeing what it changes."""

import pytest
from playwright.sync_api import expect

from approvals.models import QuotaRequest
from tests.support.usage import june_suggestions_create, june_usage_create

pytestmark = pytest.mark.django_db(transaction=True)


def test_charts_draw_offline_and_a_suggestion_becomes_a_request(
    open_session, artifacts, alloc_a, alloc_b, gpu, cluster, lead_a
):
    june_usage_create(alloc_a, alloc_b, gpu)
    suggestion = june_suggestions_create(cluster)["team-a-training"]
    page = open_session("lead-a")
    external = []
    page.on(
        "request",
        lambda r: None if "127.0.0.1" in r.url or "localhost" in r.url else external.append(r.url),
    )
    page.goto("/usage/?cluster=demo&start=2025-06-01&end=2025-06-30")
    expect(page.locator("#chart-0-0[data-drawn=true] .main-svg").first).to_be_visible()
    expect(page.locator("#chart-0-1[data-drawn=true]")).to_have_count(1)
    expect(page.locator("[data-testid=canary-team-a]")).to_contain_text("40")
    page.screenshot(path=str(artifacts / "usage.png"), full_page=True)
    assert external == []

    page.click("text=Suggestions")
    page.click(f"[data-testid=review-{suggestion.pk}]")
    # Asked first: what changes and who approves, and nothing made yet.
    expect(page.locator("[data-testid=change-cap]")).to_contain_text("→ 4")
    expect(page.locator("[data-testid=impact-policy]")).to_be_visible()
    assert not QuotaRequest.objects.exists()
    page.screenshot(path=str(artifacts / "suggestion-confirm.png"), full_page=True)
    page.click("[data-testid=confirm-draft]")
    expect(page.locator("[data-testid=status]")).to_have_text("draft")
    qr = QuotaRequest.objects.get()
    assert qr.lines.get().requested_cap == 4
