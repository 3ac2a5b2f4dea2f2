"""What a person sees of the discussion on a request, of deciding several requests at once in
the queue, and of extending a running temporary grant, in a real browser."""

import contextlib
import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from approvals.lifecycle import request_approve, request_submit, requests_follow_syncs
from approvals.models import COMMENT_MAX_LENGTH, QuotaRequest, RequestComment
from quotas.models import AuditEvent, SyncRequest, TeamNamespace
from quotas.services import allocation_set
from tests.support.browser import watch_csp
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db(transaction=True)
S = QuotaRequest.Status


@pytest.fixture
def session_in(browser, live_server):
    """session_in(username, time_zone) -> a logged-in page whose browser lives in time_zone."""
    contexts = []

    def open_as(username: str, time_zone: str = "UTC"):
        context = browser.new_context(
            base_url=live_server.url,
            viewport={"width": 1280, "height": 900},
            timezone_id=time_zone,
        )
        context.set_default_timeout(15_000)
        contexts.append(context)
        page = context.new_page()
        page.goto("/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", "pw")
        page.click("main button[type=submit]")
        page.wait_for_selector(f"[data-testid=current-user]:has-text('{username}')")
        return page

    yield open_as
    from playwright.sync_api import Error as PlaywrightError

    for context in contexts:
        for page in context.pages:
            with contextlib.suppress(PlaywrightError):
                page.wait_for_load_state("networkidle", timeout=10_000)
        context.close()


def test_lead_and_admin_discuss_a_request_in_their_time_zones(
    session_in, artifacts, plan, lead_c, admin, auditor, other_team_lead, gpu, strict_policy
):
    request = request_submit(
        request=new_request(lead_c, plan["team-c"], gpu, 3, 6), acting_user=lead_c
    )
    url = f"/requests/{request.pk}/"

    admin_page = session_in("admin", "Asia/Shanghai")
    violations = watch_csp(admin_page)
    admin_page.goto(url)
    discussion = admin_page.locator("[data-testid=discussion]")
    expect(discussion.locator("[data-testid=no-comments]")).to_be_visible()
    admin_page.fill("#id_discussion-text", "Would 5 do until the new nodes come?")
    admin_page.click("[data-testid=comment-submit]")
    expect(admin_page.locator("[data-testid=comments] li")).to_have_count(1)
    first = RequestComment.objects.get()
    shanghai = timezone.localtime(first.created_at, timezone=_zone("Asia/Shanghai"))
    stamp = admin_page.locator("[data-testid=comment-time]").first
    expect(stamp).to_have_text(f"{shanghai:%Y-%m-%d %H:%M} (Asia/Shanghai)")
    expect(discussion.locator("[data-testid=comment-author]").first).to_have_text("admin")

    lead = session_in("lead-c", "America/New_York")
    lead.goto(url)
    new_york = timezone.localtime(first.created_at, timezone=_zone("America/New_York"))
    expect(lead.locator("[data-testid=comment-time]").first).to_have_text(
        f"{new_york:%Y-%m-%d %H:%M} (America/New_York)"
    )
    # Empty, then overlong: the field says what is wrong, the text stays.
    lead.click("[data-testid=comment-submit]")
    expect(lead.locator("[data-testid=error-discussion-text]")).to_have_text(
        "a comment must not be empty"
    )
    too_long = "6 GPUs, " * (COMMENT_MAX_LENGTH // 8 + 1)
    lead.fill("#id_discussion-text", too_long)
    lead.click("[data-testid=comment-submit]")
    expect(lead.locator("[data-testid=error-discussion-text]")).to_contain_text(
        f"a comment has at most {COMMENT_MAX_LENGTH} characters"
    )
    expect(lead.locator("#id_discussion-text")).to_have_value(too_long)
    hostile = '<img src=x onerror="document.title=1">No: 6, <b>two</b> runs'
    lead.fill("#id_discussion-text", hostile)
    lead.click("[data-testid=comment-submit]")
    comments = lead.locator("[data-testid=comments] li")
    expect(comments).to_have_count(2)
    expect(comments.nth(1).locator("[data-testid=comment-text]")).to_have_text(hostile)
    expect(comments.nth(1).locator("img, b")).to_have_count(0)  # escaped, not markup
    lead.screenshot(path=str(artifacts / "request-discussion.png"), full_page=True)

    # The decision does not end the discussion; the audit log holds it.
    admin_page.goto(url)
    admin_page.fill("#id_reject-comment", "not this quarter")
    admin_page.click("[data-testid=reject]")
    expect(admin_page.locator("[data-testid=status]")).to_have_text("rejected")
    admin_page.fill("#id_discussion-text", "Ask again in January.")
    admin_page.click("[data-testid=comment-submit]")
    expect(admin_page.locator("[data-testid=comments] li")).to_have_count(3)
    assert [
        e.comment for e in AuditEvent.objects.filter(action="request.comment").order_by("seq")
    ] == [
        "Would 5 do until the new nodes come?",
        hostile,
        "Ask again in January.",
    ]
    assert violations == []

    viewer = session_in("viewer")
    viewer.goto(url)
    expect(viewer.locator("[data-testid=comments] li")).to_have_count(3)
    expect(viewer.locator("[data-testid=comment-form]")).to_have_count(0)
    expect(viewer.locator("[data-testid=comment-readonly]")).to_be_visible()
    other = session_in("lead-b")
    answer = other.goto(url)
    assert answer.status == 404
    expect(other.locator("[data-testid=discussion]")).to_have_count(0)


def _zone(name):
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


def test_admin_approves_several_requests_from_the_queue(
    session_in, artifacts, plan, cluster, lead_c, admin, admin2, gpu, strict_policy
):
    team = plan["team-c"].team
    spaces = []
    for i in range(3):
        ns = TeamNamespace.objects.create(team=team, cluster=cluster, name=f"team-c-extra-{i}")
        allocation_set(team_namespace=ns, resource=gpu, guarantee=0, cap=1, acting_user=admin)
        spaces.append(ns)
    fits = [
        request_submit(request=new_request(lead_c, ns, gpu, 1, 1), acting_user=lead_c)
        for ns in spaces[:2]
    ]
    too_big = request_submit(  # fits now; not once the two above are approved (16 of 16)
        request=new_request(lead_c, plan["team-c"], gpu, 5, 6), acting_user=lead_c
    )
    own = request_submit(request=new_request(admin, plan["team-b"], gpu, 4, 6), acting_user=admin)

    page = session_in("admin")
    page.goto("/requests/?waiting=on")
    expect(page.locator(f"[data-testid=select-{own.pk}]")).to_have_count(0)  # their own: no box
    for request in (*fits, too_big):
        page.check(f"[data-testid=select-{request.pk}]")
    page.screenshot(path=str(artifacts / "requests-bulk-selected.png"), full_page=True)
    page.click("[data-testid=bulk-approve]")
    messages = page.locator("ul.messages")
    for request in fits:
        expect(messages.locator(f"li.bulk-request-{request.pk}")).to_contain_text(
            f"Request #{request.pk}: approved (applying)"
        )
    refused = messages.locator(f"li.bulk-request-{too_big.pk}")
    expect(refused).to_have_class(re.compile(r"bulk-refused"))
    expect(refused).to_contain_text("capacity")
    # What was approved left the queue; what was refused is still waiting.
    expect(page.locator(f"[data-testid=request-{fits[0].pk}]")).to_have_count(0)
    expect(page.locator(f"[data-testid=request-{too_big.pk}]")).to_be_visible()
    page.screenshot(path=str(artifacts / "requests-bulk-done.png"), full_page=True)
    assert {r.pk: r.status for r in QuotaRequest.objects.filter(pk__in=[f.pk for f in fits])} == {
        f.pk: S.APPLYING for f in fits
    }
    assert QuotaRequest.objects.get(pk=too_big.pk).status == S.SUBMITTED

    # "Select all" then reject with a reason.
    page.check("[data-testid=select-all]")
    expect(page.locator(f"[data-testid=select-{too_big.pk}]")).to_be_checked()
    page.fill("#bulk-comment", "the cluster is full until January")
    page.click("[data-testid=bulk-reject]")
    expect(page.locator(f"ul.messages li.bulk-request-{too_big.pk}")).to_contain_text("rejected")
    assert QuotaRequest.objects.get(pk=too_big.pk).status == S.REJECTED


def test_a_lead_sees_no_bulk_action(session_in, plan, lead_c, gpu, strict_policy):
    request_submit(request=new_request(lead_c, plan["team-c"], gpu, 3, 4), acting_user=lead_c)
    lead = session_in("lead-c")
    lead.goto("/requests/?status=submitted")
    expect(lead.locator("[data-testid=requests] tbody tr")).to_have_count(1)
    expect(lead.locator("[data-testid=bulk-form]")).to_have_count(0)
    expect(lead.locator("input[name=ids]")).to_have_count(0)


def test_lead_extends_a_running_grant_and_the_admin_sees_both_ends(
    session_in, artifacts, plan, lead_c, admin, gpu, strict_policy
):
    grant = new_request(
        lead_c, plan["team-c"], gpu, 3, 6, kind="temporary", ends_in=timedelta(hours=30)
    )
    request_submit(request=grant, acting_user=lead_c)
    request_approve(request=grant, acting_user=admin)
    grant.sync_requests.update(status=SyncRequest.Status.DONE)
    requests_follow_syncs(request_ids=[grant.pk])
    grant.refresh_from_db()
    old_end = grant.ends_at

    lead = session_in("lead-c")
    lead.goto(f"/requests/{grant.pk}/")
    lead.click("[data-testid=extend] summary")
    # An end before the current one: refused at the field, the values kept.
    lead.fill("#id_extend-ends_at", f"{old_end - timedelta(hours=2):%Y-%m-%dT%H:%M}")
    lead.fill("#id_extend-justification", "the evaluation runs late")
    lead.click("[data-testid=extend-submit]")
    expect(lead.locator("[data-testid=error-extend-ends_at]")).to_contain_text(
        "ask for a later end"
    )
    expect(lead.locator("#id_extend-justification")).to_have_value("the evaluation runs late")
    new_end = (old_end + timedelta(days=3)).replace(second=0, microsecond=0)
    lead.fill("#id_extend-ends_at", f"{new_end:%Y-%m-%dT%H:%M}")
    lead.click("[data-testid=extend-submit]")
    expect(lead.locator("[data-testid=status]")).to_have_text("submitted")
    extension = QuotaRequest.objects.get(kind="extension")
    assert lead.url.endswith(f"/requests/{extension.pk}/")

    admin_page = session_in("admin")
    admin_page.goto("/requests/?waiting=on")
    row = admin_page.locator(f"[data-testid=request-{extension.pk}]")
    expect(row).to_contain_text(
        f"grant #{grant.pk}: end {old_end:%Y-%m-%d %H:%M} → {new_end:%Y-%m-%d %H:%M}"
    )
    row.locator("a").first.click()
    expect(admin_page.locator("[data-testid=extension-current-end]")).to_have_text(
        f"{old_end:%Y-%m-%d %H:%M} UTC"
    )
    expect(admin_page.locator("[data-testid=extension-new-end]")).to_have_text(
        f"{new_end:%Y-%m-%d %H:%M} UTC"
    )
    expect(admin_page.locator("input[name^=decided-]")).to_have_count(0)  # nothing to modify
    admin_page.screenshot(path=str(artifacts / "request-extension.png"), full_page=True)
    admin_page.click("[data-testid=approve]")
    expect(admin_page.locator("[data-testid=status]")).to_have_text("applied")
    grant.refresh_from_db()
    assert grant.ends_at == new_end and grant.status == S.ACTIVE

    lead.goto(f"/requests/{grant.pk}/")
    expect(lead.locator("[data-testid=extensions]")).to_contain_text(f"#{extension.pk}")
    expect(lead.locator("[data-testid=timeline]")).to_contain_text("Temporary grant extended")


def test_an_ended_grant_offers_no_extension_and_a_stale_form_gets_the_reason(
    session_in, plan, lead_c, admin, gpu, strict_policy
):
    from approvals.grants import requests_expire_due

    grant = new_request(
        lead_c, plan["team-c"], gpu, 3, 6, kind="temporary", ends_in=timedelta(hours=30)
    )
    request_submit(request=grant, acting_user=lead_c)
    request_approve(request=grant, acting_user=admin)
    grant.sync_requests.update(status=SyncRequest.Status.DONE)
    requests_follow_syncs(request_ids=[grant.pk])
    lead = session_in("lead-c")
    lead.goto(f"/requests/{grant.pk}/")
    lead.click("[data-testid=extend] summary")
    lead.fill("#id_extend-ends_at", f"{timezone.now() + timedelta(days=4):%Y-%m-%dT%H:%M}")
    lead.fill("#id_extend-justification", "later")
    requests_expire_due(now=timezone.now() + timedelta(hours=31))  # it ends meanwhile
    lead.click("[data-testid=extend-submit]")
    expect(lead.locator("[data-testid=action-errors]")).to_contain_text(
        "only a running temporary grant is extended"
    )
    expect(lead.locator("[data-testid=extend]")).to_have_count(0)
    assert not QuotaRequest.objects.filter(kind="extension").exists()
