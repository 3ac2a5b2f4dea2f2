"""The request pages: who sees what, creating and submitting, deciding, and clear refusals."""

import re

import pytest

from approvals.lifecycle import request_approve, request_submit
from approvals.models import QuotaRequest
from quotas.models import AuditEvent
from tests.support.requests import line_data, new_request

pytestmark = pytest.mark.django_db
S = QuotaRequest.Status


@pytest.fixture
def submitted(plan, lead_c, gpu, strict_policy):
    request = new_request(lead_c, plan["team-c"], gpu, 3, 6)
    return request_submit(request=request, acting_user=lead_c)


# --- who sees what ----------------------------------------------------------------------------


def test_anonymous_is_sent_to_login(client, submitted):
    for url in ("/requests/", "/requests/new/", f"/requests/{submitted.pk}/"):
        response = client.get(url)
        assert response.status_code == 302 and response.url.startswith("/login/")


def test_lead_of_another_team_neither_lists_nor_opens_the_request(client, submitted, lead_a):
    client.force_login(lead_a)
    listing = client.get("/requests/")
    assert listing.status_code == 200
    assert f'data-testid="request-{submitted.pk}"' not in listing.content.decode()
    assert client.get(f"/requests/{submitted.pk}/").status_code == 404
    assert client.get(f"/requests/{submitted.pk}/preview/").status_code == 404
    assert client.post(f"/requests/{submitted.pk}/withdraw/").status_code == 404


def test_list_shows_the_row_with_lines_and_approvals(client, submitted, lead_c, admin):
    client.force_login(lead_c)
    page = client.get("/requests/").content.decode()
    assert f'data-testid="request-{submitted.pk}"' in page
    assert "team-c-dev" in page and "2 / 4 → 3 / 6" in page
    assert f'data-testid="approvals-{submitted.pk}">0 of 1<' in page
    client.force_login(admin)
    assert f"request-{submitted.pk}" in client.get("/requests/?status=submitted").content.decode()
    assert f"request-{submitted.pk}" not in client.get("/requests/?status=draft").content.decode()


def test_waiting_for_me_leaves_out_my_own_and_those_i_approved(
    client, plan, lead_c, admin, admin2, gpu, strict_policy
):
    mine = request_submit(request=new_request(admin, plan["team-a"], gpu, 6, 8), acting_user=admin)
    theirs = request_submit(
        request=new_request(lead_c, plan["team-c"], gpu, 3, 6), acting_user=lead_c
    )
    client.force_login(admin)
    page = client.get("/requests/?waiting=on").content.decode()
    assert f"request-{theirs.pk}" in page and f"request-{mine.pk}" not in page
    client.force_login(admin2)
    page = client.get("/requests/?waiting=on").content.decode()
    assert f"request-{mine.pk}" in page


# --- creating ---------------------------------------------------------------------------------


def test_new_page_offers_only_the_leads_teams(client, plan, lead_c):
    client.force_login(lead_c)
    page = client.get("/requests/new/").content.decode()
    assert "team-c-dev" in page and "team-a-training" not in page
    assert 'id="current-values"' in page  # prefill data for the line rows


def test_member_without_lead_role_may_not_request(client, member_a):
    client.force_login(member_a)
    response = client.get("/requests/new/")
    assert response.status_code == 403
    assert "Only team leads and platform admins" in response.content.decode()


def test_save_draft(client, plan, lead_c, gpu):
    client.force_login(lead_c)
    response = client.post("/requests/new/", line_data(plan["team-c"], gpu, 3, 6, action="draft"))
    request = QuotaRequest.objects.get()
    assert response.status_code == 302 and response.url == f"/requests/{request.pk}/"
    assert request.status == S.DRAFT and request.requested_by == lead_c
    [line] = request.lines.all()
    assert (line.requested_guarantee, line.requested_cap) == (3, 6)
    page = client.get(response.url).content.decode()
    assert "<strong>Draft saved</strong>" in page  # timeline from the audit log
    assert 'data-testid="edit"' in page and 'data-testid="withdraw"' in page


def test_create_and_submit(client, plan, lead_c, gpu, strict_policy):
    client.force_login(lead_c)
    response = client.post("/requests/new/", line_data(plan["team-c"], gpu, 3, 6, action="submit"))
    request = QuotaRequest.objects.get()
    assert response.status_code == 302
    assert request.status == S.SUBMITTED
    page = client.get(response.url).content.decode()
    assert "<strong>Submitted</strong>" in page
    assert "team-c-dev" in page  # usage snapshot (cluster unreachable in tests) per namespace


def test_bad_line_names_the_line_and_keeps_the_input(client, plan, lead_c, gpu):
    client.force_login(lead_c)
    data = line_data(plan["team-c"], gpu, 3, 6, per_pod_max=8, action="draft")
    data["justification"] = "keep me please"
    response = client.post("/requests/new/", data)
    page = response.content.decode()
    assert response.status_code == 400
    assert (
        "Line 1, per-pod max: per-pod max 8 exceeds cap 6 for team-c-dev nvidia.com/gpu "
        "(per-pod max ≤ cap)"
    ) in page
    assert "keep me please" in page and 'value="8"' in page and 'value="6"' in page
    assert not QuotaRequest.objects.exists()


def test_namespace_of_another_team_is_refused_on_its_line(client, plan, admin, gpu):
    client.force_login(admin)
    data = line_data(plan["team-a"], gpu, 1, 2, action="draft", team=str(plan["team-c"].team_id))
    page = client.post("/requests/new/", data).content.decode()
    assert "Line 1, namespace: namespace" in page
    assert "does not belong to team team-c" in page


def test_cap_above_half_the_cluster_creates_nothing_and_shows_the_rule(client, plan, lead_c, gpu):
    client.force_login(lead_c)
    response = client.post("/requests/new/", line_data(plan["team-c"], gpu, 2, 9, action="submit"))
    assert response.status_code == 400
    page = response.content.decode()
    assert "cap 9 exceeds 50% of cluster demo capacity 16 nvidia.com/gpu (max 8)" in page
    assert "saved as a draft" not in page
    assert not QuotaRequest.objects.exists()  # a refused create leaves no draft behind
    assert 'action="/requests/new/"' in page  # fixing it tries again from the form
    assert 'value="9"' in page


def test_temporary_request_needs_an_end(client, plan, lead_c, gpu):
    client.force_login(lead_c)
    data = line_data(plan["team-c"], gpu, 3, 6, action="draft", kind="temporary")
    page = client.post("/requests/new/", data).content.decode()
    assert "a temporary request needs an end (ends_at)" in page
    assert 'data-testid="error-ends_at"' in page


def test_edit_a_draft_then_submit(client, plan, lead_c, gpu, strict_policy):
    draft = new_request(lead_c, plan["team-c"], gpu, 3, 6)
    client.force_login(lead_c)
    page = client.get(f"/requests/{draft.pk}/edit/").content.decode()
    assert 'name="lines-0-cap"' in page and 'value="6"' in page
    data = line_data(plan["team-c"], gpu, 3, 5, action="submit")
    data["lines-INITIAL_FORMS"] = "1"
    response = client.post(f"/requests/{draft.pk}/edit/", data)
    assert response.status_code == 302
    draft.refresh_from_db()
    assert draft.status == S.SUBMITTED and draft.lines.get().requested_cap == 5


# --- deciding ---------------------------------------------------------------------------------


def test_admin_approves_a_modified_amount(client, submitted, admin):
    client.force_login(admin)
    page = client.get(f"/requests/{submitted.pk}/").content.decode()
    assert 'data-testid="approve"' in page
    line = submitted.lines.get()
    response = client.post(
        f"/requests/{submitted.pk}/approve/",
        {f"decided-{line.pk}-cap": "5", "comment": "5 is enough for now"},
    )
    assert response.status_code == 302
    submitted.refresh_from_db()
    assert submitted.status == S.APPLYING
    page = client.get(f"/requests/{submitted.pk}/").content.decode()
    # Side by side: the cap changed by the admin stands out, the guarantee as requested.
    assert re.search(r'<td class="num changed"[^>]*data-testid="decided-cap"[^>]*>5</td>', page)
    assert re.search(r'<td class="num"[^>]*data-testid="decided-guarantee"[^>]*>3</td>', page)
    assert "5 is enough for now" in page and 'data-testid="approve"' not in page


def test_admin_decision_breaking_a_rule_is_shown_on_its_line(client, submitted, admin):
    client.force_login(admin)
    line = submitted.lines.get()
    response = client.post(
        f"/requests/{submitted.pk}/approve/",
        {f"decided-{line.pk}-guarantee": "7", f"decided-{line.pk}-cap": "5"},
    )
    assert response.status_code == 400
    assert "decisions[0].guarantee: guarantee 7 exceeds cap 5" in response.content.decode()
    submitted.refresh_from_db()
    assert submitted.status == S.SUBMITTED


def test_self_approval_is_refused_with_a_message(client, plan, admin, gpu, strict_policy):
    request = request_submit(
        request=new_request(admin, plan["team-a"], gpu, 6, 8), acting_user=admin
    )
    client.force_login(admin)
    assert 'data-testid="approve"' not in client.get(f"/requests/{request.pk}/").content.decode()
    response = client.post(f"/requests/{request.pk}/approve/", {})
    assert response.status_code == 403
    assert "nobody approves their own request" in response.content.decode()
    request.refresh_from_db()
    assert request.status == S.SUBMITTED


def test_reject_requires_a_comment(client, submitted, admin):
    client.force_login(admin)
    response = client.post(f"/requests/{submitted.pk}/reject/", {"reject-comment": " "})
    assert response.status_code == 400
    assert "say why the request is rejected (comment)" in response.content.decode()
    submitted.refresh_from_db()
    assert submitted.status == S.SUBMITTED
    response = client.post(
        f"/requests/{submitted.pk}/reject/", {"reject-comment": "no budget this quarter"}
    )
    assert response.status_code == 302
    submitted.refresh_from_db()
    assert submitted.status == S.REJECTED
    assert "no budget this quarter" in client.get(f"/requests/{submitted.pk}/").content.decode()


def test_ask_for_changes_then_the_lead_edits(client, submitted, admin, lead_c):
    client.force_login(admin)
    response = client.post(
        f"/requests/{submitted.pk}/changes/", {"changes-comment": "split it per namespace"}
    )
    assert response.status_code == 302
    submitted.refresh_from_db()
    assert submitted.status == S.CHANGES_REQUESTED
    client.force_login(lead_c)
    page = client.get(f"/requests/{submitted.pk}/").content.decode()
    assert 'data-testid="edit"' in page and "split it per namespace" in page


def test_withdraw(client, submitted, lead_c):
    client.force_login(lead_c)
    response = client.post(f"/requests/{submitted.pk}/withdraw/")
    assert response.status_code == 302
    submitted.refresh_from_db()
    assert submitted.status == S.WITHDRAWN
    assert AuditEvent.objects.filter(
        target_type="QuotaRequest", target_id=str(submitted.pk), action="request.withdrawn"
    ).exists()
    # Withdrawn twice: the state machine's message, not a 500.
    response = client.post(f"/requests/{submitted.pk}/withdraw/")
    assert response.status_code == 409 and "cannot become withdrawn" in response.content.decode()


def test_lead_sees_no_decision_buttons_and_cannot_approve(client, submitted, lead_c):
    client.force_login(lead_c)
    page = client.get(f"/requests/{submitted.pk}/").content.decode()
    assert 'data-testid="approve"' not in page and 'data-testid="reject"' not in page
    assert 'data-testid="preview-link"' not in page
    response = client.post(f"/requests/{submitted.pk}/approve/", {})
    assert response.status_code == 403
    assert "only platform admins decide quota requests" in response.content.decode()


def test_auditor_sees_but_cannot_act(client, submitted, auditor):
    client.force_login(auditor)
    assert f"request-{submitted.pk}" in client.get("/requests/").content.decode()
    page = client.get(f"/requests/{submitted.pk}/").content.decode()
    assert "team-c-dev" in page
    for button in ("approve", "reject", "withdraw", "edit", "submit"):
        assert f'data-testid="{button}"' not in page
    assert client.post(f"/requests/{submitted.pk}/approve/", {}).status_code == 403
    assert client.post(f"/requests/{submitted.pk}/withdraw/").status_code == 403
    assert client.get("/requests/new/").status_code == 403
    submitted.refresh_from_db()
    assert submitted.status == S.SUBMITTED


def test_second_admin_needed_above_the_threshold(
    client, plan, lead_c, admin, admin2, gpu, strict_policy
):
    strict_policy.two_admins_above = 1
    strict_policy.save()
    request = request_submit(
        request=new_request(lead_c, plan["team-c"], gpu, 3, 6), acting_user=lead_c
    )
    assert request.approvals_needed == 2
    request_approve(request=request, acting_user=admin)
    client.force_login(admin)
    page = client.get(f"/requests/{request.pk}/").content.decode()
    assert 'data-testid="approve"' not in page  # already approved by me
    client.force_login(admin2)
    assert 'data-testid="approve"' in client.get(f"/requests/{request.pk}/").content.decode()


def test_preview_without_a_reachable_cluster_says_so(client, submitted, admin):
    client.force_login(admin)
    response = client.get(f"/requests/{submitted.pk}/preview/")
    assert response.status_code == 200
    assert "cluster unreachable" in response.content.decode()


def test_unknown_action_is_404_and_get_is_refused(client, submitted, admin):
    client.force_login(admin)
    assert client.post(f"/requests/{submitted.pk}/explode/").status_code == 404
    assert client.get(f"/requests/{submitted.pk}/approve/").status_code == 405
