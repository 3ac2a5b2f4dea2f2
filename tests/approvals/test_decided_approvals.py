"""The number of approvals follows the decided values: an admin who approves more than was
asked, enough to need two admins, gives the first of two approvals (service, API, page)."""

import pytest

from approvals.lifecycle import request_approve, request_submit
from approvals.lines import Decision
from approvals.models import ApprovalPolicy, QuotaRequest
from common.errors import PermissionDenied
from quotas.models import Allocation, AuditEvent
from tests.support.api import as_user
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db
S = QuotaRequest.Status


@pytest.fixture
def submitted(plan, lead_c, gpu, cluster):
    """team-c 2/4 asks for 2/6: +2, one admin (two above 2)."""
    ApprovalPolicy.objects.create(
        cluster=cluster,
        auto_approve_decreases=False,
        auto_approve_increase_max=0,
        two_admins_above=2,
    )
    request = new_request(lead_c, plan["team-c"], gpu, 2, 6)
    request_submit(request=request, acting_user=lead_c)
    request.refresh_from_db()
    assert request.approvals_needed == 1
    return request


def cap_of(plan, gpu):
    return Allocation.objects.get(team_namespace=plan["team-c"], resource=gpu).cap


def test_deciding_a_bigger_amount_needs_a_second_admin(submitted, plan, gpu, admin, admin2):
    line = submitted.lines.get()
    request_approve(
        request=submitted, acting_user=admin, decisions=[Decision(line.pk, 4, 8)], comment="more"
    )
    submitted.refresh_from_db()
    assert submitted.status == S.SUBMITTED
    assert submitted.approvals_needed == 2
    assert list(submitted.approvals.values_list("admin__username", flat=True)) == ["admin"]
    assert cap_of(plan, gpu) == 4  # nothing applied yet
    event = AuditEvent.objects.filter(action="request.approval").latest("seq")
    assert "two admins must approve" in event.after["policy"]

    with pytest.raises(PermissionDenied, match="second admin"):
        request_approve(request=submitted, acting_user=admin)
    request_approve(request=submitted, acting_user=admin2)
    submitted.refresh_from_db()
    assert submitted.status == S.APPLYING
    assert cap_of(plan, gpu) == 8


def test_deciding_a_smaller_amount_keeps_one_admin(submitted, plan, gpu, admin):
    line = submitted.lines.get()
    request_approve(request=submitted, acting_user=admin, decisions=[Decision(line.pk, 2, 5)])
    submitted.refresh_from_db()
    assert (submitted.status, submitted.approvals_needed) == (S.APPLYING, 1)


def test_changed_values_void_the_earlier_approval(plan, lead_c, gpu, admin, admin2, cluster):
    ApprovalPolicy.objects.create(cluster=cluster, auto_approve_increase_max=0, two_admins_above=2)
    request = new_request(lead_c, plan["team-c"], gpu, 5, 8)  # +4: two admins
    request_submit(request=request, acting_user=lead_c)
    request_approve(request=request, acting_user=admin)
    line = request.lines.get()
    # The second admin approves other values than the first one saw: the first no longer counts.
    request_approve(request=request, acting_user=admin2, decisions=[Decision(line.pk, 6, 8)])
    request.refresh_from_db()
    assert request.status == S.SUBMITTED
    assert list(request.approvals.values_list("admin__username", flat=True)) == ["admin2"]
    event = AuditEvent.objects.filter(action="request.approval").latest("seq")
    assert event.after["approvals_dropped"] == ["admin"]
    request_approve(request=request, acting_user=admin)
    request.refresh_from_db()
    assert request.status == S.APPLYING


def test_api_approving_a_bigger_amount_waits_for_a_second_admin(
    submitted, plan, gpu, admin, admin2
):
    line = submitted.lines.get()
    response = as_user(admin).post(
        f"/api/v1/requests/{submitted.pk}/approve/",
        {"decisions": [{"line": line.pk, "guarantee": "4", "cap": "8"}]},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["status"], body["approvals_needed"], len(body["approvals"])) == (
        "submitted",
        2,
        1,
    )
    again = as_user(admin).post(f"/api/v1/requests/{submitted.pk}/approve/", {}, format="json")
    assert again.status_code == 403
    done = as_user(admin2).post(f"/api/v1/requests/{submitted.pk}/approve/", {}, format="json")
    assert done.json()["status"] == "applying"
    assert cap_of(plan, gpu) == 8


def test_page_approving_a_bigger_amount_shows_one_of_two(client, submitted, plan, gpu, admin):
    line = submitted.lines.get()
    client.force_login(admin)
    response = client.post(
        f"/requests/{submitted.pk}/approve/",
        {f"decided-{line.pk}-guarantee": "4", f"decided-{line.pk}-cap": "8"},
    )
    assert response.status_code == 302
    page = client.get(f"/requests/{submitted.pk}/").content.decode()
    assert 'data-testid="approvals-count">1 of 2 approvals given.' in page
    assert cap_of(plan, gpu) == 4
