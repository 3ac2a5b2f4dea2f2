"""Live status in a real browser: a request approved in another session, then applied by a real
Celery worker to the Kubernetes API test server, shows its new status on the lead's open page
and in another admin's open queue without a reload; the sync shows the attempt it took."""

import re

import pytest
from celery.contrib.testing.worker import start_worker
from playwright.sync_api import expect

from approvals.lifecycle import request_submit
from portal.celery import app
from quotas.models import Cluster
from tests.support.browser import watch_csp
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db(transaction=True)

# Changes show within two seconds of the poll that sees them; the worker's apply itself (a
# real sync against the test server) is not bounded by the page, so it has its own deadline.
SOON = 5_000
APPLIED = 60_000


def test_an_approval_in_another_session_shows_on_the_open_page_and_queue(
    open_session, artifacts, plan, lead_c, admin, admin2, gpu, strict_policy, kube_sandbox
):
    ns = plan["team-c"]
    Cluster.objects.filter(pk=ns.cluster_id).update(sandbox_url=kube_sandbox.url)
    qr = request_submit(request=new_request(lead_c, ns, gpu, 3, 6), acting_user=lead_c)

    lead = open_session("lead-c")
    violations = watch_csp(lead)
    lead.goto(f"/requests/{qr.pk}/")
    expect(lead.locator("[data-testid=status]")).to_have_text("submitted")
    expect(lead.locator("[data-testid=approvals-count]")).to_have_text("0 of 1 approval given.")

    queue = open_session("admin2")
    queue.goto("/requests/?status=submitted")
    row = queue.locator(f"[data-testid=request-{qr.pk}]")
    expect(row.locator(f"[data-testid=status-{qr.pk}]")).to_have_text("submitted")

    deciding = open_session("admin")
    deciding.goto(f"/requests/{qr.pk}/")
    app.loader.import_module("celery.contrib.testing.tasks")
    with start_worker(app, pool="solo", perform_ping_check=True, shutdown_timeout=30):
        deciding.click("[data-testid=approve]")
        expect(deciding.locator("[data-testid=status]")).to_have_text(
            re.compile("applying|applied")
        )

        # The lead's page and the other admin's queue, neither reloaded.
        expect(lead.locator("[data-testid=approvals-count]")).to_have_text(
            "1 of 1 approval given.", timeout=SOON
        )
        expect(lead.locator("[data-testid=approvals]")).to_contain_text("admin", timeout=SOON)
        expect(lead.locator("[data-testid=timeline]")).to_contain_text("Approved", timeout=SOON)
        expect(row.locator(f"[data-testid=status-{qr.pk}]")).to_have_text(
            re.compile("applying|applied"), timeout=SOON
        )
        expect(row.locator(f"[data-testid=approvals-{qr.pk}]")).to_have_text("1 of 1")
        # It left the queue the page shows: the page says so and offers the current list.
        expect(queue.locator("[data-testid=list-changed]")).to_be_visible(timeout=SOON)
        expect(queue.locator("[data-testid=count-submitted]")).to_have_count(0)

        # The worker applies it; the lead's page follows to the end.
        expect(lead.locator("[data-testid=status]")).to_have_text("applied", timeout=APPLIED)
        expect(row.locator(f"[data-testid=status-{qr.pk}]")).to_have_text("applied", timeout=SOON)
    sync = lead.locator("[data-testid=syncs] [data-testid=sync-status]")
    expect(sync).to_have_text("done")
    # One attempt made, and it succeeded: not "0".
    expect(lead.locator("[data-testid=syncs] [data-testid=sync-attempts]")).to_have_text("1")
    # The lead could withdraw the request when the page was opened, no longer: said so.
    expect(lead.locator("[data-testid=live-actions-changed]")).to_be_visible()
    lead.screenshot(path=str(artifacts / "live-status-applied.png"), full_page=True)
    queue.screenshot(path=str(artifacts / "live-status-queue.png"), full_page=True)
    assert violations == []
