"""Temporary grants: applied, told a day before the end, reverted at the end, synced."""

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from approvals.grants import requests_expire_due, requests_notify_expiring, requests_start_due
from approvals.lifecycle import request_approve, request_submit
from approvals.models import QuotaRequest
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
    from common.errors import ValidationFailed

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


def _guarantees(plan, gpu) -> int:
    return sum(
        Allocation.objects.filter(team_namespace__in=plan.values(), resource=gpu).values_list(
            "guarantee", flat=True
        )
    )


def test_a_started_grant_that_lowered_a_guarantee_keeps_it_promised_until_its_end(
    plan, lead_a, admin2, lead_c, gpu, admin, strict_policy
):
    """Team A lends 4 of its 6 GPUs for a while: the end gives them back, so nobody may be
    promised them meanwhile (16 = 6 + 4 + 2, 4 free)."""
    from common.errors import ValidationFailed

    lend = new_request(
        lead_a, plan["team-a"], gpu, 2, 10, kind="temporary", ends_in=timedelta(hours=3)
    )
    request_submit(request=lend, acting_user=lead_a)
    request_approve(request=lend, acting_user=admin)
    assert Allocation.objects.get(team_namespace=plan["team-a"]).guarantee == 2
    # The 4 that were free still are: team B takes them (8 + 2 + 2, and 4 held for team A).
    more_b = new_request(admin2, plan["team-b"], gpu, 8, 8)  # a platform admin asks for B
    request_submit(request=more_b, acting_user=admin2)
    request_approve(request=more_b, acting_user=admin)
    # What team A lent is not free: a request for it is refused, naming the capacity.
    more_c = new_request(lead_c, plan["team-c"], gpu, 4, 4)
    with pytest.raises(ValidationFailed, match="above its capacity 16"):
        request_submit(request=more_c, acting_user=lead_c)
    # A change of team A's own allocation meanwhile keeps the 4 held on top of it.
    smaller_a = new_request(lead_a, plan["team-a"], gpu, 1, 10)
    request_submit(request=smaller_a, acting_user=lead_a)
    request_approve(request=smaller_a, acting_user=admin)
    with pytest.raises(ValidationFailed, match="above its capacity 16"):
        request_submit(request=new_request(lead_c, plan["team-c"], gpu, 4, 4), acting_user=lead_c)
    # At its end the grant gives the 4 back on top: never above the capacity.
    QuotaRequest.objects.filter(pk=lend.pk).update(status=S.ACTIVE)
    requests_expire_due(now=lend.ends_at + timedelta(seconds=1))
    assert Allocation.objects.get(team_namespace=plan["team-a"]).guarantee == 5
    assert _guarantees(plan, gpu) == 5 + 8 + 2 <= 16


def test_a_scheduled_grant_holds_its_increase_on_top_of_later_changes(
    plan, admin2, lead_c, gpu, admin, strict_policy
):
    """Team C's grant of +2 starts later, on top of the allocation as it is then: a permanent
    change of team C meanwhile does not free the 2 (16 = 6 + 4 + 2, 4 free)."""
    from common.errors import ValidationFailed

    grant = new_request(
        lead_c,
        plan["team-c"],
        gpu,
        4,
        6,
        kind="temporary",
        starts_at=timezone.now() + timedelta(hours=2),
        ends_in=timedelta(hours=5),
    )
    request_submit(request=grant, acting_user=lead_c)
    request_approve(request=grant, acting_user=admin)
    change_c = new_request(lead_c, plan["team-c"], gpu, 3, 4)
    request_submit(request=change_c, acting_user=lead_c)
    request_approve(request=change_c, acting_user=admin)  # 6 + 4 + 3, and 2 held: 15
    more_b = new_request(admin2, plan["team-b"], gpu, 6, 6)
    with pytest.raises(ValidationFailed, match="above its capacity 16"):
        request_submit(request=more_b, acting_user=admin2)
    # The grant starts on top of 3, and the plan stays within the capacity.
    assert requests_start_due(now=grant.starts_at + timedelta(minutes=1)) == [grant.pk]
    started = Allocation.objects.get(team_namespace=plan["team-c"])
    assert (started.guarantee, started.cap) == (5, 6)
    assert _guarantees(plan, gpu) == 15


# --- bounds, withdrawing and revoking a grant that has not started -------------------------


def _scheduled_grant(plan, lead_c, gpu, admin, guarantee=6, cap=6):
    starts = timezone.now() + timedelta(days=2)
    request = new_request(
        lead_c,
        plan["team-c"],
        gpu,
        guarantee,
        cap,
        kind="temporary",
        starts_at=starts,
        ends_in=timedelta(days=5),
    )
    request_submit(request=request, acting_user=lead_c)
    request_approve(request=request, acting_user=admin)
    request.refresh_from_db()
    assert request.status == S.APPROVED
    return request


def test_a_grant_starting_too_far_ahead_is_refused_naming_the_field(plan, lead_c, gpu, settings):
    from common.errors import ValidationFailed

    settings.TEMPORARY_GRANT_MAX_START_DAYS = 30
    with pytest.raises(ValidationFailed) as err:
        new_request(
            lead_c,
            plan["team-c"],
            gpu,
            3,
            4,
            kind="temporary",
            starts_at=timezone.now() + timedelta(days=31),
            ends_in=timedelta(days=32),
        )
    assert err.value.field == "starts_at"
    assert "starts at most 30 days ahead" in err.value.message
    assert not QuotaRequest.objects.exists()


def test_a_grant_lasting_too_long_is_refused_naming_the_field(plan, lead_c, gpu, settings):
    from common.errors import ValidationFailed

    settings.TEMPORARY_GRANT_MAX_DAYS = 10
    starts = timezone.now() + timedelta(days=5)
    with pytest.raises(ValidationFailed) as err:
        new_request(
            lead_c,
            plan["team-c"],
            gpu,
            3,
            4,
            kind="temporary",
            starts_at=starts,
            ends_in=timedelta(days=16),  # 11 days from its start
        )
    assert err.value.field == "ends_at"
    assert "lasts at most 10 days" in err.value.message
    # Within both bounds: accepted.
    new_request(
        lead_c,
        plan["team-c"],
        gpu,
        3,
        4,
        kind="temporary",
        starts_at=starts,
        ends_in=timedelta(days=14),
    )


def test_the_api_refuses_the_year_9999_grant(plan, lead_c):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(lead_c)
    response = client.post(
        "/api/v1/requests/",
        {
            "team": "team-c",
            "justification": "forever",
            "kind": "temporary",
            "starts_at": "9999-01-01T00:00:00Z",
            "ends_at": "9999-12-31T00:00:00Z",
            "lines": [
                {
                    "namespace": "team-c-dev",
                    "cluster": "demo",
                    "resource": "nvidia.com/gpu",
                    "guarantee": "3",
                    "cap": "4",
                }
            ],
            "submit": True,
        },
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["extra"]["field"] == "starts_at"
    assert not QuotaRequest.objects.exists()


def test_the_requester_withdraws_a_scheduled_grant_and_the_capacity_is_free(
    plan, lead_c, lead_a, gpu, admin, strict_policy
):
    from approvals.lifecycle import request_withdraw

    grant = _scheduled_grant(plan, lead_c, gpu, admin)  # 6 + 4 + 6 = 16, promised
    blocked = new_request(lead_a, plan["team-a"], gpu, 7, 8)
    with pytest.raises(Exception, match="above its capacity 16"):
        request_submit(request=blocked, acting_user=lead_a)
    request_withdraw(request=grant, acting_user=lead_c, comment="plans changed")
    grant.refresh_from_db()
    assert grant.status == S.WITHDRAWN
    request_submit(request=blocked, acting_user=lead_a)  # the capacity is back
    assert requests_start_due(now=timezone.now() + timedelta(days=3)) == []  # never starts
    assert Allocation.objects.get(team_namespace=plan["team-c"]).guarantee == 2


def test_an_admin_revokes_a_scheduled_grant_audited(
    plan, lead_c, lead_a, gpu, admin, strict_policy
):
    from approvals.grants import request_revoke
    from common.errors import PermissionDenied, ValidationFailed

    grant = _scheduled_grant(plan, lead_c, gpu, admin)
    with pytest.raises(PermissionDenied):
        request_revoke(request=grant, acting_user=lead_c, comment="mine")
    with pytest.raises(ValidationFailed) as err:
        request_revoke(request=grant, acting_user=admin, comment=" ")
    assert err.value.field == "comment"
    request_revoke(request=grant, acting_user=admin, comment="the cluster is needed")
    grant.refresh_from_db()
    assert (grant.status, grant.decided_by, grant.decision_comment) == (
        S.REVOKED,
        admin,
        "the cluster is needed",
    )
    event = AuditEvent.objects.get(action="request.revoked", target_id=str(grant.pk))
    assert (event.actor, event.before, event.after["status"]) == (
        admin,
        {"status": "approved"},
        "revoked",
    )
    request_submit(request=new_request(lead_a, plan["team-a"], gpu, 7, 8), acting_user=lead_a)


def test_a_started_grant_is_not_revoked(plan, lead_c, gpu, admin, strict_policy):
    from approvals.grants import request_revoke
    from common.errors import NotAllowed

    grant = _scheduled_grant(plan, lead_c, gpu, admin, guarantee=3, cap=4)
    requests_start_due(now=timezone.now() + timedelta(days=3))
    with pytest.raises(NotAllowed, match="cannot become revoked"):
        request_revoke(request=grant, acting_user=admin, comment="too late")


def test_revoke_and_withdraw_through_the_api_and_the_page(
    client, plan, lead_c, gpu, admin, strict_policy
):
    from rest_framework.test import APIClient

    grant = _scheduled_grant(plan, lead_c, gpu, admin, guarantee=3, cap=4)
    client.force_login(admin)
    page = client.get(f"/requests/{grant.pk}/").content.decode()
    assert 'data-testid="revoke-button"' in page
    response = client.post(f"/requests/{grant.pk}/revoke/", {"revoke-comment": ""})
    assert response.status_code == 400
    assert "say why the grant is revoked" in response.content.decode()

    api = APIClient()
    api.force_authenticate(admin)
    response = api.post(
        f"/api/v1/requests/{grant.pk}/revoke/", {"comment": "needed"}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "revoked"

    other = _scheduled_grant(plan, lead_c, gpu, admin, guarantee=3, cap=4)
    client.force_login(lead_c)
    assert 'data-testid="withdraw"' in client.get(f"/requests/{other.pk}/").content.decode()
    assert client.post(f"/requests/{other.pk}/withdraw/").status_code == 302
    other.refresh_from_db()
    assert other.status == S.WITHDRAWN
