"""Notifications of decisions go out after the commit only."""

import json
from datetime import timedelta

import pytest
from django.core import mail
from django.db import transaction
from django.utils import timezone

from approvals.grants import request_revoke
from approvals.lifecycle import request_approve, request_submit, request_withdraw
from approvals.models import QuotaRequest
from portal.celery import app
from tests.support.requests import new_request


class Boom(Exception):
    pass


@pytest.fixture
def eager_tasks(monkeypatch):
    """Notification tasks run inline; the cluster sync the approval asks for is only
    recorded (it has tests of its own and no cluster is running here)."""
    from quotas import tasks

    monkeypatch.setattr(tasks.sync_cluster, "delay", lambda *args: None)
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


@pytest.fixture
def submitted(plan, lead_c, gpu, strict_policy):
    lead_c.email = "lead-c@example.com"
    lead_c.save()
    request = new_request(lead_c, plan["team-c"], gpu, 3, 6)
    request_submit(request=request, acting_user=lead_c)
    mail.outbox.clear()
    return request


@pytest.mark.django_db(transaction=True)
def test_a_committed_approval_notifies_the_requester(submitted, admin, eager_tasks):
    request_approve(request=submitted, acting_user=admin, comment="go")
    assert [m.to for m in mail.outbox] == [["lead-c@example.com"]]
    assert "approved" in mail.outbox[0].subject


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_approval_sends_nothing(submitted, admin, eager_tasks):
    with pytest.raises(Boom), transaction.atomic():
        request_approve(request=submitted, acting_user=admin, comment="go")
        raise Boom  # something later in the same transaction fails
    assert mail.outbox == []
    submitted.refresh_from_db()
    assert submitted.status == QuotaRequest.Status.SUBMITTED
    assert not submitted.approvals.exists()
    assert not submitted.sync_requests.exists()


@pytest.mark.django_db(transaction=True)
def test_submission_tells_the_platform_admins(plan, lead_c, gpu, strict_policy, admin, eager_tasks):
    admin.email = "admin@example.com"
    admin.save()
    request = new_request(lead_c, plan["team-c"], gpu, 3, 6)
    request_submit(request=request, acting_user=lead_c)
    assert [m.to for m in mail.outbox] == [["admin@example.com"]]


# --- a scheduled grant taken back: withdrawn by its requester, revoked by an admin ----------


@pytest.fixture
def webhooks(settings):
    from tests.support.notify import SECRET, Receiver

    with Receiver() as receiver:
        settings.WEBHOOK_URLS = [f"{receiver.url}/hook"]
        settings.WEBHOOK_SECRET = SECRET
        settings.WEBHOOK_TIMEOUT = 5.0
        yield receiver


def _scheduled_grant(plan, lead_c, gpu, admin, webhooks):
    lead_c.email = "lead-c@example.com"
    lead_c.save()
    admin.email = "admin@example.com"
    admin.save()
    grant = new_request(
        lead_c,
        plan["team-c"],
        gpu,
        3,
        5,
        kind="temporary",
        starts_at=timezone.now() + timedelta(days=1),
        ends_in=timedelta(days=2),
    )
    request_submit(request=grant, acting_user=lead_c)
    request_approve(request=grant, acting_user=admin)
    grant.refresh_from_db()
    assert grant.status == QuotaRequest.Status.APPROVED
    mail.outbox.clear()
    webhooks.requests.clear()  # the submit's and the approval's
    return grant


def _signed_event(webhooks) -> dict:
    from approvals.notify import verify_signature
    from tests.support.notify import SECRET

    [delivery] = webhooks.wait_for(1)
    headers = delivery["headers"]
    assert verify_signature(
        delivery["body"],
        SECRET,
        headers["X-Portal-Signature"],
        delivery_id=headers["X-Portal-Delivery"],
    )
    return json.loads(delivery["body"])


@pytest.mark.django_db(transaction=True)
def test_withdrawing_an_approved_grant_tells_the_admins_and_the_team(
    plan, lead_c, gpu, admin, strict_policy, eager_tasks, webhooks
):
    grant = _scheduled_grant(plan, lead_c, gpu, admin, webhooks)
    request_withdraw(request=grant, acting_user=lead_c, comment="the run was cancelled")
    [message] = mail.outbox
    assert message.subject == f"[GPU quota] request #{grant.pk} withdrawn by its requester (team-c)"
    assert sorted(message.to) == ["admin@example.com", "lead-c@example.com"]
    assert "Comment, as written:\n> the run was cancelled\n" in message.body
    sent = _signed_event(webhooks)
    assert sent["event"] == "request.withdrawn"
    assert (sent["data"]["id"], sent["data"]["status"]) == (grant.pk, "withdrawn")


@pytest.mark.django_db(transaction=True)
def test_revoking_an_approved_grant_through_the_api_tells_the_team(
    plan, lead_c, gpu, admin, admin2, strict_policy, eager_tasks, webhooks
):
    from rest_framework.test import APIClient

    grant = _scheduled_grant(plan, lead_c, gpu, admin, webhooks)
    api = APIClient()
    api.force_authenticate(admin2)
    response = api.post(
        f"/api/v1/requests/{grant.pk}/revoke/", {"comment": "the cluster is drained"}, format="json"
    )
    assert response.status_code == 200, response.content
    [message] = mail.outbox
    assert message.subject == f"[GPU quota] request #{grant.pk} revoked by an admin (team-c)"
    assert message.to == ["lead-c@example.com"]
    assert "Comment, as written:\n> the cluster is drained\n" in message.body
    sent = _signed_event(webhooks)
    assert sent["event"] == "request.revoked"
    assert sent["data"]["decision_comment"] == "the cluster is drained"


@pytest.mark.django_db(transaction=True)
def test_a_refused_revoke_or_a_withdrawn_draft_tells_nobody(
    plan, lead_c, gpu, admin, strict_policy, eager_tasks, webhooks
):
    grant = _scheduled_grant(plan, lead_c, gpu, admin, webhooks)
    with pytest.raises(Boom), transaction.atomic():
        request_revoke(request=grant, acting_user=admin, comment="no")
        raise Boom  # rolled back: nothing was revoked, nobody is told
    draft = new_request(lead_c, plan["team-c"], gpu, 3, 5)
    request_withdraw(request=draft, acting_user=lead_c)
    assert mail.outbox == []
    assert webhooks.requests == []
