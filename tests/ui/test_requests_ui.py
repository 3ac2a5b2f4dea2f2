"""End to end in a real browser: a lead asks for quota (the server checks the form as it is
typed), an admin approves a modified amount."""

import re

import pytest
from playwright.sync_api import expect

from approvals.models import QuotaRequest
from tests.support.browser import live_check_answered

pytestmark = pytest.mark.django_db(transaction=True)


def test_lead_requests_and_admin_approves_a_modified_cap(
    open_session, artifacts, plan, lead_c, admin, gpu, strict_policy
):
    lead = open_session("lead-c")
    lead.click("text=Requests")
    lead.click("[data-testid=new-request]")
    lead.select_option("#id_team", label="team-c")
    row = lead.locator("[data-testid=line-0]")
    row.locator("select[name=lines-0-team_namespace]").select_option(label="team-c-dev (demo)")
    row.locator("select[name=lines-0-resource]").select_option(label="A100 card (nvidia.com/gpu)")
    expect(row.locator("[data-current]")).to_have_text("2 / 4")  # prefilled current values
    row.locator("input[name=lines-0-guarantee]").fill("3")
    row.locator("input[name=lines-0-cap]").fill("6")
    lead.fill("#id_justification", "nightly evaluation runs need a third card")
    lead.screenshot(path=str(artifacts / "request-new.png"), full_page=True)
    lead.click("[data-testid=submit]")
    expect(lead.locator("[data-testid=status]")).to_have_text("submitted")
    request_id = int(re.search(r"/requests/(\d+)/", lead.url).group(1))
    expect(lead.locator("[data-testid=approve]")).to_have_count(0)

    admin_page = open_session("admin")
    admin_page.goto("/requests/?waiting=on")
    admin_page.screenshot(path=str(artifacts / "requests-waiting.png"), full_page=True)
    admin_page.click(f"[data-testid=request-{request_id}] a")
    line_id = QuotaRequest.objects.get(pk=request_id).lines.get().pk
    admin_page.fill(f"input[name=decided-{line_id}-cap]", "5")
    admin_page.fill("#id_comment", "5 is enough until the new nodes arrive")
    admin_page.screenshot(path=str(artifacts / "request-decide.png"), full_page=True)
    admin_page.click("[data-testid=approve]")

    expect(admin_page.locator("[data-testid=status]")).to_have_text("applying")
    expect(admin_page.locator("[data-testid=decided-cap]")).to_have_text("5")
    expect(admin_page.locator("[data-testid=timeline]")).to_contain_text("Approved")
    admin_page.screenshot(path=str(artifacts / "request-approved.png"), full_page=True)

    lead.reload()
    expect(lead.locator("[data-testid=decided-cap]")).to_have_text("5")
    lead.screenshot(path=str(artifacts / "request-approved-lead.png"), full_page=True)
    request = QuotaRequest.objects.get(pk=request_id)
    assert request.status == QuotaRequest.Status.APPLYING
    assert request.lines.get().decided_cap == 5


def test_a_rule_broken_on_submit_is_shown_at_the_line_and_nothing_is_created(
    open_session, artifacts, plan, lead_c, gpu
):
    lead = open_session("lead-c")
    lead.goto("/")
    lead.click("[data-testid=new-request-team-c]")  # the home page's button for leads
    expect(lead.locator("#id_team")).to_have_value(str(plan["team-c"].team_id))
    lead.locator("select[name=lines-0-team_namespace]").select_option(label="team-c-dev (demo)")
    lead.locator("select[name=lines-0-resource]").select_option(label="A100 card (nvidia.com/gpu)")
    lead.fill("input[name=lines-0-guarantee]", "2")
    lead.fill("input[name=lines-0-cap]", "9")
    lead.fill("#id_justification", "one big run")
    lead.click("[data-testid=submit]")

    line = lead.locator("[data-testid=line-0]")
    expect(line).to_contain_text(
        "cap 9 exceeds 50% of cluster demo capacity 16 nvidia.com/gpu (max 8)"
    )
    expect(line.locator("input[name=lines-0-cap]")).to_have_value("9")
    lead.screenshot(path=str(artifacts / "request-refused.png"), full_page=True)
    assert not QuotaRequest.objects.exists()  # a refused create leaves no draft behind

    # Fixing the line on the same page creates and submits the request.
    lead.fill("input[name=lines-0-cap]", "8")
    lead.click("[data-testid=submit]")
    expect(lead.locator("[data-testid=status]")).to_have_text(re.compile("submitted|applying"))
    assert QuotaRequest.objects.count() == 1


def test_the_form_fills_in_the_current_values_and_keeps_them(
    open_session, artifacts, plan, lead_c, gpu, admin, strict_policy
):
    from quotas.models import Allocation, PriorityClass
    from quotas.services import allocation_set

    PriorityClass.objects.create(name="production-inference", value=100000)
    PriorityClass.objects.create(name="experiment", value=1000, preempts=False)
    allocation_set(
        team_namespace=plan["team-c"],
        resource=gpu,
        guarantee=2,
        cap=4,
        per_pod_max=2,
        priority_classes=["experiment"],
        acting_user=admin,
    )
    lead = open_session("lead-c")
    lead.goto("/requests/new/")
    lead.select_option("#id_team", label="team-c")
    row = lead.locator("[data-testid=line-0]")
    row.locator("select[name=lines-0-team_namespace]").select_option(label="team-c-dev (demo)")
    row.locator("select[name=lines-0-resource]").select_option(label="A100 card (nvidia.com/gpu)")
    # Filled in as values, not only shown as placeholders.
    expect(row.locator("input[name=lines-0-guarantee]")).to_have_value("2")
    expect(row.locator("input[name=lines-0-cap]")).to_have_value("4")
    expect(row.locator("input[name=lines-0-per_pod_max]")).to_have_value("2")
    expect(row.locator("select[name=lines-0-priority_classes]")).to_have_values(["experiment"])
    row.locator("input[name=lines-0-cap]").fill("5")
    lead.fill("#id_justification", "one more card")
    lead.screenshot(path=str(artifacts / "request-prefilled.png"), full_page=True)
    lead.click("[data-testid=submit]")
    expect(lead.locator("[data-testid=status]")).to_have_text("submitted")
    line = QuotaRequest.objects.get().lines.get()
    assert (line.requested_cap, line.requested_per_pod_max) == (5, 2)
    assert line.requested_priority_classes == ["experiment"]
    assert Allocation.objects.get(team_namespace=plan["team-c"]).per_pod_max == 2


def test_admin_removes_the_per_pod_max_and_widens_the_classes_in_the_approve_form(
    open_session, artifacts, plan, lead_c, admin, gpu, strict_policy
):
    from approvals.lifecycle import request_create
    from approvals.lines import LineInput
    from quotas.models import Allocation, PriorityClass
    from quotas.services import allocation_set

    PriorityClass.objects.create(name="production-inference", value=100000)
    PriorityClass.objects.create(name="experiment", value=100)
    strict_policy.two_admins_for_higher_class = False  # one admin decides here
    strict_policy.save()
    ns = plan["team-c"]
    allocation_set(
        team_namespace=ns,
        resource=gpu,
        guarantee=2,
        cap=4,
        per_pod_max=2,
        priority_classes=["experiment"],
        acting_user=admin,
    )
    request = request_create(
        team=ns.team,
        acting_user=lead_c,
        justification="evaluation pods of four GPUs",
        lines=[LineInput(ns.pk, gpu.pk, 3, 4)],
        submit=True,
    )
    line_id = request.lines.get().pk

    page = open_session("admin")
    page.goto(f"/requests/{request.pk}/")
    page.check(f"input[name=decided-{line_id}-remove_per_pod_max]")
    page.select_option(
        f"select[name=decided-{line_id}-priority_classes]",
        ["experiment", "production-inference"],
    )
    page.fill("#id_comment", "pods may use the whole cap; serving needs the high class")
    page.screenshot(path=str(artifacts / "request-decide-classes.png"), full_page=True)
    page.click("[data-testid=approve]")

    expect(page.locator("[data-testid=status]")).to_have_text("applying")
    classes = page.locator(f"[data-testid=line-{line_id}-priority_classes]")
    expect(classes.locator("[data-testid=current-priority_classes]")).to_have_text("experiment")
    expect(classes.locator("[data-testid=decided-priority_classes]")).to_have_text(
        "experiment, production-inference"
    )
    allocation = Allocation.objects.get(team_namespace=ns)
    assert allocation.per_pod_max is None
    assert allocation.priority_classes == ["experiment", "production-inference"]


def test_typing_an_impossible_value_shows_the_servers_message_without_submitting(
    open_session, artifacts, plan, lead_c, gpu, strict_policy
):
    lead = open_session("lead-c")
    lead.goto("/requests/new/")
    lead.select_option("#id_team", label="team-c")
    row = lead.locator("[data-testid=line-0]")
    row.locator("select[name=lines-0-team_namespace]").select_option(label="team-c-dev (demo)")
    row.locator("select[name=lines-0-resource]").select_option(label="A100 card (nvidia.com/gpu)")
    expect(row.locator("input[name=lines-0-cap]")).to_have_value("4")  # prefilled

    # A guarantee above the cap: the server's own words, next to the field, as one types.
    guarantee = row.locator("input[name=lines-0-guarantee]")
    with live_check_answered(lead, {"lines-0-guarantee": "5", "lines-0-cap": "4"}):
        guarantee.fill("5")
    message = lead.locator("#id_lines-0-guarantee_error")
    expect(message).to_have_text(
        "Line 1, guarantee: guarantee 5 exceeds cap 4 for team-c-dev nvidia.com/gpu "
        "(guarantee ≤ cap)"
    )
    expect(guarantee).to_have_attribute("aria-invalid", "true")
    expect(guarantee).to_have_attribute("aria-describedby", "id_lines-0-guarantee_error")
    # The justification not typed yet is not blamed; nothing was submitted or saved.
    expect(lead.locator("#id_justification_error")).to_have_count(0)
    assert lead.url.endswith("/requests/new/")
    assert not QuotaRequest.objects.exists()

    # A plan rule: the cap above half the cluster, with the impact of what was typed.
    with live_check_answered(lead, {"lines-0-guarantee": "3", "lines-0-cap": "9"}):
        guarantee.fill("3")
        row.locator("input[name=lines-0-cap]").fill("9")
    expect(lead.locator("#id_lines-0-cap_error")).to_have_text(
        "Line 1, cap: cap 9 exceeds 50% of cluster demo capacity 16 nvidia.com/gpu (max 8)"
    )
    expect(message).to_have_count(0)
    expect(guarantee).not_to_have_attribute("aria-invalid", "true")
    expect(lead.locator("#id_lines-0-cap_warning")).to_have_text("cap rises from 4 to 9 (×2.3)")
    expect(lead.locator("[data-testid=impact-guaranteed]")).to_have_text("12 → 13")
    expect(lead.locator("[data-testid=impact-team-share]")).to_have_text("2 (12.5%) → 3 (18.8%)")
    lead.screenshot(path=str(artifacts / "request-live-check.png"), full_page=True)

    # Fixed: no error left, the policy says who must approve; still nothing saved.
    with live_check_answered(lead, {"lines-0-guarantee": "3", "lines-0-cap": "6"}):
        row.locator("input[name=lines-0-cap]").fill("6")
    expect(lead.locator("#id_lines-0-cap_error")).to_have_count(0)
    expect(lead.locator("[data-testid=impact-policy]")).to_have_text(
        re.compile("Needs the approval of 1 platform admin.")
    )
    assert not QuotaRequest.objects.exists()

    # Submitting without a justification: the page shows the same kind of answer, and keeps
    # showing it once the sent-back page's own check has answered; the impact stays that of
    # the lines in the form.
    # The submit, and the check the sent-back page sends as it loads: both awaited.
    with (
        live_check_answered(lead, {"lines-0-guarantee": "3", "lines-0-cap": "6"}),
        lead.expect_navigation(),
    ):
        lead.click("[data-testid=submit]")
    expect(lead.locator("[data-testid=error-justification]")).to_have_text(
        "This field is required."
    )
    expect(lead.locator("[data-testid=impact-guaranteed]")).to_have_text("12 → 13")
    expect(lead.locator("input[name=lines-0-cap]")).to_have_value("6")
    assert not QuotaRequest.objects.exists()


def test_the_check_button_shows_admins_the_clusters_dry_run(
    open_session, artifacts, plan, admin, gpu, kube_sandbox
):
    from quotas.kube.sync import cluster_sync
    from quotas.models import Cluster

    cluster = plan["team-c"].cluster
    Cluster.objects.filter(pk=cluster.pk).update(sandbox_url=kube_sandbox.url)
    assert cluster_sync(cluster_id=cluster.pk).status == "succeeded"
    page = open_session("admin")
    page.goto("/requests/new/")
    page.select_option("#id_team", label="team-c")
    row = page.locator("[data-testid=line-0]")
    row.locator("select[name=lines-0-team_namespace]").select_option(label="team-c-dev (demo)")
    row.locator("select[name=lines-0-resource]").select_option(label="A100 card (nvidia.com/gpu)")
    row.locator("input[name=lines-0-cap]").fill("6")
    page.click("[data-testid=check]")
    diff = page.locator("[data-testid=preview-demo]")
    expect(diff).to_contain_text("spec.hard.requests.nvidia.com/gpu: 4 → 6")
    # The button did not post the page: the justification left empty is now named.
    expect(page.locator("#id_justification_error")).to_have_text("This field is required.")
    assert page.url.endswith("/requests/new/")
    page.screenshot(path=str(artifacts / "request-check-dry-run.png"), full_page=True)
    assert not QuotaRequest.objects.exists()


def test_the_overviews_fix_of_a_cap_above_the_share_becomes_a_request_within_it(
    open_session, artifacts, plan, lead_a, admin, gpu, strict_policy
):
    """The seed's own example breaks the 50% rule (team A 6/10 on 16 GPUs): the overview
    offers the cap within it, and that form, sent as it opens, asks for exactly that."""
    lead = open_session("lead-a")
    lead.goto("/clusters/")
    expect(lead.locator("[data-testid=finding-why]").first).to_contain_text("others are idle")
    lead.click("[data-testid=finding-fix]")
    row = lead.locator("[data-testid=line-0]")
    # The page's script leaves the offered values as they came.
    expect(row.locator("input[name=lines-0-cap]")).to_have_value("8")
    expect(row.locator("input[name=lines-0-guarantee]")).to_have_value("6")
    lead.fill("#id_justification", "bring team A's cap within the cluster's 50% share")
    lead.screenshot(path=str(artifacts / "request-cap-within-share.png"), full_page=True)
    lead.click("[data-testid=submit]")
    expect(lead.locator("[data-testid=status]")).not_to_have_text("draft")
    line = QuotaRequest.objects.get().lines.get()
    assert (line.requested_guarantee, line.requested_cap) == (6, 8)
    assert line.team_namespace == plan["team-a"]
