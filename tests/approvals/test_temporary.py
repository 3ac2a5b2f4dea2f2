"""Temporary grants: applied, told a day before the end, reverted at the end, synced."""

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from approvals.models import QuotaRequest
from approvals.services import (
    request_approve,
    request_submit,
    requests_expire_due,
    requests_notify_expiring,
    requests_start_due,
)
from portal.celery import app
from quotas.kube.sync import cluster_sync
from quotas.models import Allocation, AuditEvent, Cluster
from quotas.services import allocation_set
from tests.approvals.conftest import new_request

pytestmark = pytest.mark.django_db
S = QuotaRequest.Status
GPU = "requests.nvidia.com/gpu"


@pytest.fixture
def eager_tasks():
    """Run notification tasks inline so their mail lands in the test outbox."""
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


def _sync(cluster, capture) -> None:
    with capture(execute=True):
        run = cluster_sync(cluster_id=cluster.pk)
    assert run.status == "succeeded", run.error


def test_temporary_grant_lives_and_expires_through_the_cluster(
    plan,
    lead_c,
    gpu,
    admin,
    strict_policy,
    kube_sandbox,
    django_capture_on_commit_callbacks,
    eager_tasks,
):
    cluster = plan["team-c"].cluster
    Cluster.objects.filter(pk=cluster.pk).update(sandbox_url=kube_sandbox.url)
    _sync(cluster, django_capture_on_commit_callbacks)  # the plan as it is
    lead_c.email = "lead-c@example.com"
    lead_c.save()

    request = new_request(
        lead_c, plan["team-c"], gpu, 4, 6, kind="temporary", ends_in=timedelta(hours=30)
    )
    request_submit(request=request, acting_user=lead_c)
    request_approve(request=request, acting_user=admin, comment="for the deadline")
    _sync(cluster, django_capture_on_commit_callbacks)  # the sync tells the request
    request.refresh_from_db()
    assert request.status == S.ACTIVE
    quota = kube_sandbox.get_object("v1", "ResourceQuota", "gpu-quota", "team-c-dev")
    assert quota["spec"]["hard"][GPU] == "6"

    # A day before the end the team is told, once.
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert requests_notify_expiring(now=timezone.now()) == []
        assert requests_notify_expiring(now=request.ends_at - timedelta(hours=20)) == [request.pk]
        assert requests_notify_expiring(now=request.ends_at - timedelta(hours=10)) == []
    assert [m.to for m in mail.outbox] == [["lead-c@example.com"]]
    assert "expir" in mail.outbox[0].subject.lower()

    # At the end the previous allocation comes back, and reaches the cluster.
    with django_capture_on_commit_callbacks(execute=True):
        assert requests_expire_due(now=request.ends_at - timedelta(minutes=1)) == []
        assert requests_expire_due(now=request.ends_at + timedelta(minutes=1)) == [request.pk]
    request.refresh_from_db()
    assert request.status == S.EXPIRED and request.reverted_at
    allocation = Allocation.objects.get(team_namespace=plan["team-c"])
    assert (allocation.guarantee, allocation.cap) == (2, 4)
    assert allocation.versions.get(version=allocation.version).source.endswith(":expired")
    _sync(cluster, django_capture_on_commit_callbacks)
    quota = kube_sandbox.get_object("v1", "ResourceQuota", "gpu-quota", "team-c-dev")
    assert quota["spec"]["hard"][GPU] == "4"


def test_expiry_takes_back_only_the_grant_when_the_allocation_changed_meanwhile(
    plan, lead_c, gpu, admin, strict_policy
):
    request = new_request(
        lead_c, plan["team-c"], gpu, 4, 6, kind="temporary", ends_in=timedelta(hours=3)
    )
    request_submit(request=request, acting_user=lead_c)
    request_approve(request=request, acting_user=admin)
    QuotaRequest.objects.filter(pk=request.pk).update(status=S.ACTIVE)
    # A permanent change lands during the grant: cap 6 -> 7.
    allocation_set(
        team_namespace=plan["team-c"], resource=gpu, guarantee=4, cap=7, acting_user=admin
    )
    requests_expire_due(now=request.ends_at + timedelta(seconds=1))
    allocation = Allocation.objects.get(team_namespace=plan["team-c"])
    # The grant was +2 guarantee, +2 cap: those go, the later +1 cap stays.
    assert (allocation.guarantee, allocation.cap) == (2, 5)
    request.refresh_from_db()
    assert request.status == S.EXPIRED
    event = AuditEvent.objects.get(action="request.expired", target_id=str(request.pk))
    assert "changed during the grant" in event.comment


def test_grant_with_a_later_start_waits_then_applies(plan, lead_c, gpu, admin, strict_policy):
    starts = timezone.now() + timedelta(hours=2)
    request = new_request(
        lead_c,
        plan["team-c"],
        gpu,
        4,
        6,
        kind="temporary",
        starts_at=starts,
        ends_in=timedelta(hours=5),
    )
    request_submit(request=request, acting_user=lead_c)
    request_approve(request=request, acting_user=admin)
    request.refresh_from_db()
    assert request.status == S.APPROVED
    assert Allocation.objects.get(team_namespace=plan["team-c"]).guarantee == 2
    assert requests_start_due(now=starts - timedelta(minutes=1)) == []
    assert requests_start_due(now=starts + timedelta(minutes=1)) == [request.pk]
    request.refresh_from_db()
    assert request.status == S.APPLYING
    assert Allocation.objects.get(team_namespace=plan["team-c"]).guarantee == 4


def test_scheduled_grants_count_against_capacity(plan, lead_c, lead_a, gpu, admin, strict_policy):
    from portal.errors import ValidationFailed

    starts = timezone.now() + timedelta(hours=2)
    request = new_request(
        lead_c,
        plan["team-c"],
        gpu,
        6,
        6,
        kind="temporary",
        starts_at=starts,
        ends_in=timedelta(hours=5),
    )
    request_submit(request=request, acting_user=lead_c)
    request_approve(request=request, acting_user=admin)  # 6 + 4 + 6 = 16: full, later
    other = new_request(lead_a, plan["team-a"], gpu, 7, 8)
    with pytest.raises(ValidationFailed, match="above its capacity 16"):
        request_submit(request=other, acting_user=lead_a)
