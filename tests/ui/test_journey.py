"""The whole journey in a real headless Chromium against a live portal, a real Celery worker and
the Kubernetes API test server: a lead sees the dashboard chart, asks for more GPUs, sees the
server's validation message appear while typing an impossible value, submits; an admin approves
a changed amount; the worker applies it; the quota is in the cluster and the pages show it.

Run three times: in English, in Simplified Chinese (the browser's Accept-Language picks it) and
on a 390 px phone screen. Every step leaves a screenshot in tests/ui/artifacts/."""

from decimal import Decimal

import pytest
from celery.contrib.testing.worker import start_worker
from django.utils import translation
from kubernetes import client as k8s
from playwright.sync_api import expect

from approvals.models import QuotaRequest
from portal.celery import app
from quotas.models import Allocation, Cluster
from tests.support.kube import api_client_for
from tests.support.waiting import poll
from tests.support.worlds import add_usage

pytestmark = pytest.mark.django_db(transaction=True)

VARIANTS = {
    "en": {"locale": "en-US", "viewport": {"width": 1280, "height": 900}, "lang": "en"},
    "zh": {"locale": "zh-CN", "viewport": {"width": 1280, "height": 900}, "lang": "zh-hans"},
    "phone": {"locale": "en-US", "viewport": {"width": 390, "height": 844}, "lang": "en"},
}


def _login(browser, live_server, variant: dict, username: str):
    context = browser.new_context(
        base_url=live_server.url, viewport=variant["viewport"], locale=variant["locale"]
    )
    context.set_default_timeout(60_000)
    page = context.new_page()
    page.goto("/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "pw")
    page.press("#id_password", "Enter")
    page.wait_for_selector(f"[data-testid=current-user]:has-text('{username}')")
    return context, page


def _fits(page, variant: dict) -> None:
    """The page is in the browser's language and, on a phone, no wider than its screen."""
    expect(page.locator("html")).to_have_attribute("lang", variant["lang"])
    width = variant["viewport"]["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= width, page.url


def _wait_for(predicate, timeout: float = 90.0) -> None:
    poll("the request's next status", predicate, timeout, 0.05)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_lead_asks_admin_approves_worker_applies(
    name, browser, live_server, artifacts, plan, lead_c, admin, gpu, strict_policy, kube_sandbox
):
    variant = VARIANTS[name]
    shot = lambda page, step: page.screenshot(  # noqa: E731
        path=str(artifacts / f"journey-{name}-{step}.png"), full_page=True
    )
    ns = plan["team-c"]
    Cluster.objects.filter(pk=ns.cluster_id).update(sandbox_url=kube_sandbox.url)
    add_usage(ns, gpu)  # the dashboard's chart draws from the usage rollups
    app.loader.import_module("celery.contrib.testing.tasks")
    lead_context, lead = _login(browser, live_server, variant, "lead-c")
    admin_context, admin_page = _login(browser, live_server, variant, "admin")
    try:
        with start_worker(app, pool="solo", perform_ping_check=True, shutdown_timeout=30):
            # 1. The dashboard with its usage chart.
            lead.goto("/")
            team = lead.locator("[data-testid=team-team-c]")
            expect(team.locator(".chart[data-drawn=true]").first).to_be_visible()
            _fits(lead, variant)
            shot(lead, "1-dashboard")

            # 2. The form: an impossible value gets the server's message as it is typed.
            team.locator("[data-testid=new-request-team-c]").click()
            row = lead.locator("[data-testid=line-0]")
            row.locator("select[name=lines-0-team_namespace]").select_option(str(ns.pk))
            row.locator("select[name=lines-0-resource]").select_option(str(gpu.pk))
            expect(row.locator("input[name=lines-0-cap]")).to_have_value("4")
            guarantee = row.locator("input[name=lines-0-guarantee]")
            guarantee.fill("5")
            error = lead.locator("#id_lines-0-guarantee_error")
            expect(error).to_be_visible()
            expect(error).to_contain_text("5")
            expect(guarantee).to_have_attribute("aria-invalid", "true")
            assert not QuotaRequest.objects.exists()
            _fits(lead, variant)
            shot(lead, "2-live-error")

            # 3. Fixed and submitted.
            guarantee.fill("3")
            row.locator("input[name=lines-0-cap]").fill("6")
            expect(error).to_have_count(0)
            lead.fill("#id_justification", "nightly evaluation runs need a third card")
            lead.click("[data-testid=submit]")
            _wait_for(lambda: QuotaRequest.objects.filter(status="submitted").exists(), 30)
            qr = QuotaRequest.objects.get()
            lead.wait_for_url(f"**/requests/{qr.pk}/")
            _fits(lead, variant)
            shot(lead, "3-submitted")

            # 4. The admin approves a smaller cap.
            admin_page.goto(f"/requests/{qr.pk}/")
            line = qr.lines.get()
            admin_page.fill(f"input[name=decided-{line.pk}-cap]", "5")
            admin_page.fill("#id_comment", "5 until the new nodes arrive")
            _fits(admin_page, variant)
            shot(admin_page, "4-decide")
            admin_page.click("[data-testid=approve]")

            # 5. The worker applies it to the cluster.
            _wait_for(lambda: QuotaRequest.objects.get(pk=qr.pk).status == "applied")
    finally:
        lead_context.close()
        admin_context.close()

    allocation = Allocation.objects.get(team_namespace=ns, resource=gpu)
    assert (allocation.guarantee, allocation.cap) == (Decimal(3), Decimal(5))
    api = api_client_for(kube_sandbox)
    try:
        quotas = k8s.CoreV1Api(api).list_namespaced_resource_quota(ns.name).items
    finally:
        api.close()
    hard = {key: value for quota in quotas for key, value in (quota.spec.hard or {}).items()}
    assert "5" in {hard.get("limits.nvidia.com/gpu"), hard.get("requests.nvidia.com/gpu")}, hard

    # 6. The pages show what the cluster holds.
    lead_context, lead = _login(browser, live_server, variant, "lead-c")
    try:
        lead.goto(f"/requests/{qr.pk}/")
        expect(lead.locator("[data-testid=decided-cap]")).to_have_text("5")
        with translation.override(variant["lang"]):
            applied = str(QuotaRequest.Status.APPLIED.label)
        expect(lead.locator("[data-testid=status]")).to_have_text(applied)
        _fits(lead, variant)
        shot(lead, "5-applied")
        lead.goto("/")
        allocation_row = lead.locator(f"[data-testid=allocation-{ns.name}-nvidiacomgpu]")
        expect(allocation_row.locator("[data-testid=cap]")).to_have_text("5")
        expect(allocation_row.locator("[data-testid=guarantee]")).to_have_text("3")
        _fits(lead, variant)
        shot(lead, "6-dashboard-after")
    finally:
        lead_context.close()
