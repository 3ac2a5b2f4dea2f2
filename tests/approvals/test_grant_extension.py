"""Extending a running temporary grant: an extension request, decided like any request; once
approved the grant's end moves and the expiry follows the new end."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from approvals.grants import grant_extension_request, requests_expire_due
from approvals.lifecycle import request_approve, request_reject, requests_follow_syncs
from approvals.models import ApprovalPolicy, QuotaRequest
from common.errors import NotAllowed, PermissionDenied, ValidationFailed
from quotas.models import Allocation, AuditEvent, SyncRequest
from tests.support.requests import new_request, running_grant

pytestmark = pytest.mark.django_db
S = QuotaRequest.Status


@pytest.fixture
def grant(plan, lead_c, gpu, admin, strict_policy):
    return running_grant(lead_c, plan["team-c"], gpu, admin)


def test_an_approved_extension_moves_the_end_and_the_expiry_follows_it(grant, lead_c, admin, plan):
    old_end = grant.ends_at
    new_end = old_end + timedelta(days=3)
    extension = grant_extension_request(
        grant=grant, acting_user=lead_c, ends_at=new_end, justification="runs late"
    )
    assert (extension.kind, extension.status, extension.extends_id) == (
        "extension",
        S.SUBMITTED,
        grant.pk,
    )
    assert not extension.auto_approved and extension.approvals_needed == 1
    assert f"#{grant.pk}" in extension.policy_reason
    # Its lines are the grant's namespace and resource as allocated now: no change.
    line = extension.lines.get()
    assert (line.current_guarantee, line.requested_guarantee) == (3, 3)
    assert (line.current_cap, line.requested_cap) == (6, 6)

    versions = Allocation.objects.get(team_namespace=plan["team-c"]).version
    request_approve(request=extension, acting_user=admin, comment="ok")
    extension.refresh_from_db()
    grant.refresh_from_db()
    assert extension.status == S.APPLIED
    assert grant.ends_at == new_end and grant.status == S.ACTIVE
    allocation = Allocation.objects.get(team_namespace=plan["team-c"])
    assert allocation.version == versions  # no allocation written, nothing to sync
    assert not extension.sync_requests.exists()
    event = AuditEvent.objects.get(action="request.extended", target_id=str(grant.pk))
    assert event.before == {"ends_at": old_end.isoformat()}
    assert event.after["ends_at"] == new_end.isoformat() and event.actor == admin

    # At the old end the grant keeps running; at the new one it is taken back.
    assert requests_expire_due(now=old_end + timedelta(minutes=1)) == []
    grant.refresh_from_db()
    assert grant.status == S.ACTIVE
    assert requests_expire_due(now=new_end + timedelta(minutes=1)) == [grant.pk]
    grant.refresh_from_db()
    assert grant.status == S.EXPIRED
    allocation.refresh_from_db()
    assert (allocation.guarantee, allocation.cap) == (2, 4)


def test_an_ended_grant_is_not_extended(grant, lead_c, admin):
    requests_expire_due(now=grant.ends_at + timedelta(minutes=1))
    grant.refresh_from_db()
    with pytest.raises(NotAllowed) as refused:
        grant_extension_request(
            grant=grant,
            acting_user=lead_c,
            ends_at=timezone.now() + timedelta(days=2),
            justification="more",
        )
    assert refused.value.field == "status"
    assert "only a running temporary grant is extended" in refused.value.message
    assert not QuotaRequest.objects.filter(kind="extension").exists()


def test_a_grant_ending_while_its_extension_waits_refuses_the_approval(grant, lead_c, admin):
    extension = grant_extension_request(
        grant=grant,
        acting_user=lead_c,
        ends_at=grant.ends_at + timedelta(days=1),
        justification="more",
    )
    requests_expire_due(now=grant.ends_at + timedelta(minutes=1))
    with pytest.raises(NotAllowed) as refused:
        request_approve(request=extension, acting_user=admin)
    assert refused.value.field == "extends"
    assert "an ended grant is not extended" in refused.value.message
    extension.refresh_from_db()
    assert extension.status == S.SUBMITTED and not extension.approvals.exists()
    # Rejecting (or withdrawing) it stays possible.
    request_reject(request=extension, acting_user=admin, comment="the grant ended")


def test_the_new_end_must_be_later_bounded_and_one_extension_at_a_time(grant, lead_c, settings):
    with pytest.raises(ValidationFailed) as earlier:
        grant_extension_request(
            grant=grant, acting_user=lead_c, ends_at=grant.ends_at, justification="x"
        )
    assert earlier.value.field == "ends_at" and "ask for a later end" in earlier.value.message
    with pytest.raises(ValidationFailed) as too_far:
        grant_extension_request(
            grant=grant,
            acting_user=lead_c,
            ends_at=timezone.now() + timedelta(days=settings.TEMPORARY_GRANT_MAX_DAYS + 1),
            justification="x",
        )
    assert too_far.value.field == "ends_at"
    with pytest.raises(ValidationFailed) as no_reason:
        grant_extension_request(
            grant=grant,
            acting_user=lead_c,
            ends_at=grant.ends_at + timedelta(days=1),
            justification=" ",
        )
    assert no_reason.value.field == "justification"
    first = grant_extension_request(
        grant=grant,
        acting_user=lead_c,
        ends_at=grant.ends_at + timedelta(days=1),
        justification="x",
    )
    with pytest.raises(NotAllowed) as second:
        grant_extension_request(
            grant=grant,
            acting_user=lead_c,
            ends_at=grant.ends_at + timedelta(days=2),
            justification="x",
        )
    assert f"#{first.pk}" in second.value.message


def test_who_may_ask(grant, other_team_lead, auditor, lead_c):
    for person in (other_team_lead, auditor):
        with pytest.raises(PermissionDenied):
            grant_extension_request(
                grant=grant,
                acting_user=person,
                ends_at=grant.ends_at + timedelta(days=1),
                justification="x",
            )


def test_a_permanent_request_or_a_scheduled_grant_is_not_extended(
    plan, lead_c, gpu, admin, strict_policy
):
    permanent = new_request(lead_c, plan["team-c"], gpu, 3, 5)
    scheduled = new_request(
        lead_c,
        plan["team-c"],
        gpu,
        3,
        5,
        kind="temporary",
        starts_at=timezone.now() + timedelta(days=1),
        ends_in=timedelta(days=2),
    )
    for request in (permanent, scheduled):
        with pytest.raises(NotAllowed):
            grant_extension_request(
                grant=request,
                acting_user=lead_c,
                ends_at=timezone.now() + timedelta(days=5),
                justification="x",
            )


def test_a_large_grant_needs_two_admins_to_extend_and_an_extension_has_no_decided_values(
    plan, lead_c, gpu, admin, admin2, cluster
):
    ApprovalPolicy.objects.create(
        cluster=cluster,
        auto_approve_decreases=False,
        auto_approve_increase_max=0,
        two_admins_above=1,
    )
    # The grant itself (2 → 4 guarantee) needs two admins as well.
    from approvals.lifecycle import request_submit

    grant = new_request(
        lead_c, plan["team-c"], gpu, 4, 6, kind="temporary", ends_in=timedelta(hours=30)
    )
    request_submit(request=grant, acting_user=lead_c)
    request_approve(request=grant, acting_user=admin)
    request_approve(request=grant, acting_user=admin2)
    grant.sync_requests.update(status=SyncRequest.Status.DONE)
    requests_follow_syncs(request_ids=[grant.pk])
    grant.refresh_from_db()

    extension = grant_extension_request(
        grant=grant,
        acting_user=lead_c,
        ends_at=grant.ends_at + timedelta(days=1),
        justification="x",
    )
    assert extension.approvals_needed == 2
    assert "two admins must approve" in extension.policy_reason
    from approvals.lines import Decision

    with pytest.raises(ValidationFailed) as modified:
        request_approve(
            request=extension,
            acting_user=admin,
            decisions=[Decision(line_id=extension.lines.get().pk, guarantee=2, cap=4)],
        )
    assert modified.value.field == "decisions"
    request_approve(request=extension, acting_user=admin)
    extension.refresh_from_db()
    assert extension.status == S.SUBMITTED
    request_approve(request=extension, acting_user=admin2)
    extension.refresh_from_db()
    grant.refresh_from_db()
    assert extension.status == S.APPLIED and grant.ends_at == extension.ends_at


def test_the_api_extends_a_grant_and_refuses_an_ended_one(grant, lead_c, admin):
    from portal.tokens import api_token_create

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=lead_c, name='t')[1]}")
    new_end = grant.ends_at + timedelta(days=2)
    answer = client.post(
        f"/api/v1/requests/{grant.pk}/extend/",
        {"ends_at": new_end.isoformat(), "justification": "later"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="extend-1",
    )
    assert answer.status_code == 201, answer.json()
    body = answer.json()
    assert (body["kind"], body["extends"], body["status"]) == ("extension", grant.pk, "submitted")
    again = client.post(
        f"/api/v1/requests/{grant.pk}/extend/",
        {"ends_at": new_end.isoformat(), "justification": "later"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="extend-1",
    )
    assert again.status_code == 201 and again.json()["id"] == body["id"]  # replayed, not twice
    assert QuotaRequest.objects.filter(kind="extension").count() == 1
    listed = client.get("/api/v1/requests/?kind=extension").json()["results"]
    assert [(r["id"], r["extends"]) for r in listed] == [(body["id"], grant.pk)]

    requests_expire_due(now=grant.ends_at + timedelta(minutes=1))
    refused = client.post(
        f"/api/v1/requests/{grant.pk}/extend/",
        {"ends_at": (timezone.now() + timedelta(days=3)).isoformat(), "justification": "later"},
        format="json",
    )
    assert refused.status_code == 409
    assert "only a running temporary grant is extended" in refused.json()["message"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(3))
def test_approving_an_extension_while_the_grant_expires(
    round_, plan, lead_c, gpu, admin, strict_policy
):
    """The expiry picked the grant as due, the approval moves its end at the same moment:
    either the grant is extended (and does not expire at its old end), or it expired and the
    approval is refused with the reason; never both, never a deadlock."""
    from tests.support.races import race

    grant = running_grant(lead_c, plan["team-c"], gpu, admin, hours=1)
    extension = grant_extension_request(
        grant=grant,
        acting_user=lead_c,
        ends_at=grant.ends_at + timedelta(days=1),
        justification="x",
    )
    at_old_end = grant.ends_at + timedelta(seconds=1)
    outcomes = race(
        lambda: request_approve(request=extension, acting_user=admin),
        lambda: requests_expire_due(now=at_old_end),
    )
    assert not any(o.startswith("crash") for o in outcomes), outcomes
    grant.refresh_from_db()
    extension.refresh_from_db()
    if outcomes[0] == "ok":
        assert extension.status == S.APPLIED
        assert grant.status == S.ACTIVE and grant.ends_at == extension.ends_at
    else:
        assert outcomes[0] == "NotAllowed"
        assert grant.status == S.EXPIRED and extension.status == S.SUBMITTED
