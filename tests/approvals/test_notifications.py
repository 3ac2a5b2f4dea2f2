"""Notifications of decisions go out after the commit only."""

import pytest
from django.core import mail
from django.db import transaction

from approvals.models import QuotaRequest
from approvals.services import request_approve, request_submit
from portal.celery import app
from tests.approvals.conftest import new_request


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
