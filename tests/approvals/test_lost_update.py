"""Lost update: a request approved after its allocation changed must not undo that change.

The issue's case: R1 (team-b 4/6 → 4/8) waits; R2 (team-b → 5/6) is applied; approving R1 as it
was would set the guarantee back to 4. Each line records the version it was written against;
approval is refused (409 in the API) naming what changed, and a rebase fixes it in one step.
"""

from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from approvals.lifecycle import request_approve, request_rebase, request_submit
from approvals.lines import Decision
from approvals.models import QuotaRequest
from common.errors import NotAllowed, PermissionDenied, ValidationFailed
from quotas.models import Allocation, AuditEvent
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db
S = QuotaRequest.Status


@pytest.fixture
def r1_then_r2_applied(plan, other_team_lead, gpu, admin, strict_policy):
    """R1 waits (4/8, written against 4/6 v1); R2 (5/6) is approved and applied meanwhile."""
    ns_b = plan["team-b"]
    r1 = new_request(other_team_lead, ns_b, gpu, 4, 8)
    request_submit(request=r1, acting_user=other_team_lead)
    r2 = new_request(other_team_lead, ns_b, gpu, 5, 6)
    request_submit(request=r2, acting_user=other_team_lead)
    request_approve(request=r2, acting_user=admin)
    allocation = Allocation.objects.get(team_namespace=ns_b)
    assert (allocation.guarantee, allocation.cap, allocation.version) == (5, 6, 2)
    return r1


def _allocation_b(plan):
    return Allocation.objects.get(team_namespace=plan["team-b"])


def test_each_line_records_the_version_it_was_written_against(plan, lead_c, gpu):
    request = new_request(lead_c, plan["team-c"], gpu, 3, 4)
    assert request.lines.get().base_version == 1


def test_approving_against_a_changed_allocation_is_refused_naming_the_change(
    r1_then_r2_applied, plan, admin2
):
    r1 = r1_then_r2_applied
    with pytest.raises(NotAllowed) as err:
        request_approve(request=r1, acting_user=admin2)
    assert err.value.status_code == 409
    assert "team-b-inference nvidia.com/gpu guarantee: 4 → 5" in err.value.message
    assert "rebase" in err.value.message
    [change] = err.value.extra["changes"]
    assert (change["field"], change["base"], change["current"]) == ("guarantee", "4", "5")
    assert (change["base_version"], change["current_version"]) == (1, 2)
    r1.refresh_from_db()
    assert r1.status == S.SUBMITTED and r1.approvals.count() == 0
    assert (_allocation_b(plan).guarantee, _allocation_b(plan).version) == (5, 2)  # R2 stands


def test_a_modified_decision_is_refused_too(r1_then_r2_applied, plan, admin2):
    r1 = r1_then_r2_applied
    line = r1.lines.get()
    with pytest.raises(NotAllowed):
        request_approve(
            request=r1,
            acting_user=admin2,
            decisions=[Decision(line_id=line.pk, guarantee=4, cap=7)],
        )
    assert _allocation_b(plan).guarantee == 5


def test_rebase_keeps_what_the_request_changes_and_follows_the_rest(
    r1_then_r2_applied, plan, other_team_lead, admin2
):
    r1 = r1_then_r2_applied
    request_rebase(request=r1, acting_user=other_team_lead)
    line = r1.lines.get()
    # The guarantee was not the request's change (4 = base): it follows R2's 5; the cap is kept.
    assert (line.requested_guarantee, line.requested_cap) == (Decimal(5), Decimal(8))
    assert (line.current_guarantee, line.current_cap) == (Decimal(5), Decimal(6))
    assert (line.base_version, line.current_version) == (2, 2)
    event = AuditEvent.objects.get(action="request.rebased", target_id=str(r1.pk))
    assert event.actor == other_team_lead
    assert event.before["lines"][0]["requested"]["guarantee"] == "4"
    assert event.after["lines"][0]["requested"]["guarantee"] == "5"

    request_approve(request=r1, acting_user=admin2)
    allocation = _allocation_b(plan)
    assert (allocation.guarantee, allocation.cap, allocation.version) == (5, 8, 3)


def test_rebase_drops_approvals_and_decisions_given_on_the_old_base(
    plan, other_team_lead, gpu, admin, admin2, strict_policy
):
    strict_policy.two_admins_above = Decimal(1)
    strict_policy.save()
    ns_b = plan["team-b"]
    r1 = request_submit(
        request=new_request(other_team_lead, ns_b, gpu, 4, 8), acting_user=other_team_lead
    )
    assert r1.approvals_needed == 2
    line = r1.lines.get()
    request_approve(
        request=r1, acting_user=admin2, decisions=[Decision(line_id=line.pk, guarantee=3, cap=8)]
    )
    assert r1.approvals.count() == 1
    r2 = new_request(other_team_lead, ns_b, gpu, 5, 6)
    request_submit(request=r2, acting_user=other_team_lead)
    request_approve(request=r2, acting_user=admin)

    request_rebase(request=r1, acting_user=admin)
    r1.refresh_from_db()
    line.refresh_from_db()
    assert line.decided_cap is None  # decided against the old base: decided again
    assert r1.approvals.count() == 0
    assert (r1.status, r1.approvals_needed) == (S.SUBMITTED, 2)  # policy checked again


def test_rebase_that_no_longer_fits_the_plan_is_refused_and_changes_nothing(
    plan, other_team_lead, gpu, admin, strict_policy
):
    from quotas.services import allocation_set

    ns_b = plan["team-b"]
    r1 = request_submit(
        request=new_request(other_team_lead, ns_b, gpu, 6, 8), acting_user=other_team_lead
    )  # 6 + 6 + 2 = 14 of 16
    allocation_set(team_namespace=ns_b, resource=gpu, guarantee=4, cap=7, acting_user=admin)
    allocation_set(
        team_namespace=plan["team-c"], resource=gpu, guarantee=5, cap=5, acting_user=admin
    )
    with pytest.raises(ValidationFailed, match="above its capacity 16"):
        request_rebase(request=r1, acting_user=other_team_lead)  # 6 + 6 + 5 = 17
    line = r1.lines.get()
    assert (line.base_version, line.current_cap) == (1, 6)  # rolled back
    assert not AuditEvent.objects.filter(action="request.rebased").exists()


def test_rebase_whose_kept_values_no_longer_hold_is_refused_naming_the_field(
    plan, other_team_lead, gpu, admin, strict_policy
):
    ns_b = plan["team-b"]
    shrink = new_request(other_team_lead, ns_b, gpu, 4, 5)  # only the cap changes: 6 → 5
    request_submit(request=shrink, acting_user=other_team_lead)
    from quotas.services import allocation_set

    allocation_set(team_namespace=ns_b, resource=gpu, guarantee=6, cap=6, acting_user=admin)
    with pytest.raises(ValidationFailed) as err:
        request_rebase(request=shrink, acting_user=other_team_lead)
    assert err.value.field == "lines[0].guarantee"
    assert "guarantee 6 exceeds cap 5" in err.value.message
    line = shrink.lines.get()
    assert (line.base_version, line.requested_guarantee) == (1, 4)  # rolled back


def test_an_up_to_date_request_is_left_alone(plan, lead_c, gpu, strict_policy):
    request = request_submit(
        request=new_request(lead_c, plan["team-c"], gpu, 3, 4), acting_user=lead_c
    )
    before = AuditEvent.objects.count()
    request_rebase(request=request, acting_user=lead_c)
    assert AuditEvent.objects.count() == before


def test_only_the_requester_the_teams_leads_or_an_admin_rebase(r1_then_r2_applied, lead_a, auditor):
    for user in (lead_a, auditor):
        with pytest.raises(PermissionDenied):
            request_rebase(request=r1_then_r2_applied, acting_user=user)


def test_decided_requests_are_not_rebased(r1_then_r2_applied, admin, other_team_lead):
    from approvals.lifecycle import request_reject

    request_reject(request=r1_then_r2_applied, acting_user=admin, comment="no")
    with pytest.raises(NotAllowed, match="only drafts and requests waiting"):
        request_rebase(request=r1_then_r2_applied, acting_user=other_team_lead)


# --- through the API and the page ---------------------------------------------------------------


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_api_answers_409_with_what_changed_and_rebases(
    r1_then_r2_applied, plan, admin2, other_team_lead
):
    r1 = r1_then_r2_applied
    response = _api(admin2).post(f"/api/v1/requests/{r1.pk}/approve/", {}, format="json")
    assert response.status_code == 409
    body = response.json()
    assert "rebase" in body["message"]
    assert body["extra"]["field"] == "lines[0].guarantee"
    [change] = body["extra"]["changes"]
    assert {k: change[k] for k in ("field", "base", "current")} == {
        "field": "guarantee",
        "base": "4",
        "current": "5",
    }

    response = _api(other_team_lead).post(f"/api/v1/requests/{r1.pk}/rebase/", {}, format="json")
    assert response.status_code == 200, response.content
    [line] = response.json()["lines"]
    assert line["requested"]["guarantee"] == "5" and line["requested"]["cap"] == "8"

    response = _api(admin2).post(f"/api/v1/requests/{r1.pk}/approve/", {}, format="json")
    assert response.status_code == 200, response.content
    assert _allocation_b(plan).guarantee == 5


def test_page_shows_what_changed_and_a_rebase_button(
    client, r1_then_r2_applied, plan, admin2, other_team_lead
):
    r1 = r1_then_r2_applied
    client.force_login(admin2)
    response = client.post(f"/requests/{r1.pk}/approve/", {"comment": ""})
    assert response.status_code == 409
    page = response.content.decode()
    assert 'data-testid="stale"' in page
    assert "guarantee: 4 → 5" in page

    client.force_login(other_team_lead)
    page = client.get(f"/requests/{r1.pk}/").content.decode()
    assert 'data-testid="rebase"' in page
    response = client.post(f"/requests/{r1.pk}/rebase/")
    assert response.status_code == 302
    page = client.get(f"/requests/{r1.pk}/").content.decode()
    assert 'data-testid="stale"' not in page
    assert r1.lines.get().requested_guarantee == 5
