"""The overview pages in a real browser, offline and under the CSP: the team dashboard and the
cluster overview draw their plotly charts from the portal's own files, and at a phone's width
(390 px) wide tables stack their rows inside their card instead of pushing it wider."""

import pytest
from playwright.sync_api import expect

from quotas.models import TeamMembership
from tests.support.browser import wait_until_settled, watch_csp
from tests.support.people import make_user
from tests.support.worlds import grow_world

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def lead_t0(admin):
    world = grow_world(teams=3, clusters=2, requests_per_team=7, admin=admin)
    user = make_user("lead-t0")
    TeamMembership.objects.create(team=world["teams"][0], user=user, role="lead")
    return user


def phone_session(browser, live_server, username: str):
    context = browser.new_context(base_url=live_server.url, viewport={"width": 390, "height": 844})
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.goto("/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "pw")
    page.click("main button[type=submit]")
    page.wait_for_selector(f"[data-testid=current-user]:has-text('{username}')")
    return context, page


def offsite_requests(page) -> list[str]:
    found: list[str] = []
    page.on(
        "request",
        lambda r: None if "127.0.0.1" in r.url or "localhost" in r.url else found.append(r.url),
    )
    return found


def test_the_dashboard_and_cluster_charts_draw_offline_without_csp_violations(
    open_session, artifacts, lead_t0
):
    page = open_session("lead-t0")
    violations, external = watch_csp(page), offsite_requests(page)
    page.goto("/")
    chart = page.locator("[data-testid=team-t0] .chart[role=img]").first
    expect(chart).to_have_attribute("data-drawn", "true")
    expect(chart.locator(".main-svg").first).to_be_visible()
    expect(page.locator("[data-testid=team-t0] .chart[data-drawn=true]")).to_have_count(2)
    page.screenshot(path=str(artifacts / "dashboard.png"), full_page=True)

    page.goto("/clusters/")
    expect(page.locator(".chart[data-drawn=true]")).to_have_count(2)
    # Plotly lists a stack's legend top down: the aggregate sits on the lead's own team.
    expect(page.locator("[data-testid=cluster-c0] .legendtext")).to_have_text(["Other teams", "t0"])
    page.screenshot(path=str(artifacts / "clusters.png"), full_page=True)
    for url in ("/clusters/c1/", "/summary/"):
        page.goto(url)
        wait_until_settled(page)
    assert violations == [] and external == []


def test_the_audit_log_page_has_no_csp_violation(open_session, lead_t0, admin):
    page = open_session("admin")
    violations = watch_csp(page)
    page.goto("/audit/?team=t0")
    expect(page.locator("[data-testid=audit-events] tbody tr")).to_have_count(11)
    page.select_option("#a-action", "request.submitted")
    page.click("[data-testid=filters] button[type=submit]")
    expect(page.locator("[data-testid=audit-events] tbody tr")).to_have_count(7)
    assert "action=request.submitted" in page.get_attribute("[data-testid=export-csv]", "href")
    assert violations == []


@pytest.mark.parametrize(("username", "url"), [("lead-t0", "/"), ("admin", "/summary/")])
def test_wide_tables_stack_inside_their_card_at_390px(
    browser, live_server, artifacts, lead_t0, username, url
):
    context, page = phone_session(browser, live_server, username)
    try:
        page.goto(url)
        wait_until_settled(page)
        boxes = page.eval_on_selector_all(
            ".table-scroll",
            """els => els.filter(e => e.offsetParent !== null).map(e => ({
                wrapper: e.getBoundingClientRect().right,
                card: e.closest('.card').getBoundingClientRect().right,
                scrolls: e.scrollWidth > e.clientWidth,
            }))""",
        )
        assert boxes, "no visible table"
        assert all(b["wrapper"] <= b["card"] + 0.5 for b in boxes), boxes
        # Nothing to scroll sideways: a wide table's rows stack, each cell under its label.
        assert not any(b["scrolls"] for b in boxes), boxes
        label = page.eval_on_selector(
            "table.stack tbody td[data-label]", "e => getComputedStyle(e, '::before').content"
        )
        assert label not in ("none", "normal", '""'), label
        page.screenshot(path=str(artifacts / f"phone{url.replace('/', '-')}.png"), full_page=True)
    finally:
        context.close()
