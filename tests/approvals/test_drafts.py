"""Failed requests leave no debris: a refused create-and-submit creates nothing, a refused
revise-and-submit keeps the request as it was, and drafts can be deleted by their requester."""

import pytest
from rest_framework.test import APIClient

from approvals.lifecycle import request_create, request_delete, request_revise
from approvals.lines import LineInput
from approvals.models import QuotaRequest, RequestLine
from common.errors import NotAllowed, PermissionDenied, ValidationFailed
from quotas.models import AuditEvent
from tests.support.requests import line_data, new_request

pytestmark = pytest.mark.django_db
S = QuotaRequest.Status


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_create_and_submit_refused_by_the_plan_creates_nothing(plan, lead_c, gpu, strict_policy):
    events = AuditEvent.objects.count()
    with pytest.raises(ValidationFailed, match="cap 9 exceeds 50%"):
        request_create(
            team=plan["team-c"].team,
            acting_user=lead_c,
            justification="too much",
            lines=[LineInput(plan["team-c"].pk, gpu.pk, 2, 9)],
            submit=True,
        )
    assert not QuotaRequest.objects.exists()
    assert not RequestLine.objects.exists()
    assert AuditEvent.objects.count() == events


def test_create_and_submit_in_one_step(plan, lead_c, gpu, strict_policy):
    request = request_create(
        team=plan["team-c"].team,
        acting_user=lead_c,
        justification="one more card",
        lines=[LineInput(plan["team-c"].pk, gpu.pk, 3, 4)],
        submit=True,
    )
    assert request.status == S.SUBMITTED
    actions = list(
        AuditEvent.objects.filter(target_type="QuotaRequest", target_id=str(request.pk))
        .order_by("seq")
        .values_list("action", flat=True)
    )
    assert actions == ["request.draft", "request.submitted"]


def test_revise_and_submit_refused_keeps_the_request_as_it_was(plan, lead_c, gpu, strict_policy):
    draft = new_request(lead_c, plan["team-c"], gpu, 3, 4)
    with pytest.raises(ValidationFailed):
        request_revise(
            request=draft,
            acting_user=lead_c,
            lines=[LineInput(plan["team-c"].pk, gpu.pk, 2, 9)],
            submit=True,
        )
    draft.refresh_from_db()
    assert draft.status == S.DRAFT
    assert draft.lines.get().requested_cap == 4


def test_the_edit_form_submit_refused_keeps_the_draft_unchanged(client, plan, lead_c, gpu):
    draft = new_request(lead_c, plan["team-c"], gpu, 3, 4)
    client.force_login(lead_c)
    response = client.post(
        f"/requests/{draft.pk}/edit/", line_data(plan["team-c"], gpu, 2, 9, action="submit")
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "cap 9 exceeds 50%" in page
    assert "saved as a draft" not in page
    assert 'value="9"' in page  # the input is kept in the form
    assert draft.lines.get().requested_cap == 4


def test_the_requester_deletes_a_draft_audited(plan, lead_c, gpu):
    draft = new_request(lead_c, plan["team-c"], gpu, 3, 4)
    request_delete(request=draft, acting_user=lead_c)
    assert not QuotaRequest.objects.filter(pk=draft.pk).exists()
    event = AuditEvent.objects.get(action="request.deleted")
    assert (event.actor, event.target_id, event.after) == (lead_c, str(draft.pk), None)
    assert event.before["status"] == "draft"
    assert event.before["lines"][0]["requested"]["cap"] == "4"


def test_only_drafts_are_deleted_and_only_by_their_requester(
    plan, lead_c, gpu, admin, strict_policy
):
    from approvals.lifecycle import request_submit

    draft = new_request(lead_c, plan["team-c"], gpu, 3, 4)
    with pytest.raises(PermissionDenied):
        request_delete(request=draft, acting_user=admin)
    request_submit(request=draft, acting_user=lead_c)
    with pytest.raises(NotAllowed, match="only drafts are deleted"):
        request_delete(request=draft, acting_user=lead_c)
    assert QuotaRequest.objects.filter(pk=draft.pk).exists()


def test_delete_a_draft_through_the_api(plan, lead_c, gpu, strict_policy):
    draft = new_request(lead_c, plan["team-c"], gpu, 3, 4)
    response = _api(lead_c).delete(f"/api/v1/requests/{draft.pk}/")
    assert response.status_code == 204
    assert not QuotaRequest.objects.exists()
    assert _api(lead_c).delete(f"/api/v1/requests/{draft.pk}/").status_code == 404

    submitted = request_create(
        team=plan["team-c"].team,
        acting_user=lead_c,
        justification="keep",
        lines=[LineInput(plan["team-c"].pk, gpu.pk, 3, 4)],
        submit=True,
    )
    response = _api(lead_c).delete(f"/api/v1/requests/{submitted.pk}/")
    assert response.status_code == 409
    assert response.json()["extra"]["field"] == "status"


def test_delete_a_draft_on_its_page(client, plan, lead_c, gpu):
    draft = new_request(lead_c, plan["team-c"], gpu, 3, 4)
    client.force_login(lead_c)
    assert 'data-testid="delete"' in client.get(f"/requests/{draft.pk}/").content.decode()
    response = client.post(f"/requests/{draft.pk}/delete/")
    assert response.status_code == 302 and response.url == "/requests/"
    assert not QuotaRequest.objects.exists()
