"""Temporary grants: applied, told a day before the end, reverted at the end, synced."""

from datetime import timedelta
from decimal import Decimal as D

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
from tests.support.requests import new_request

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


# --- what a grant widened never outlasts it ------------------------------------------------------


MIG = "nvidia.com/mig-1g.10gb"


@pytest.fixture
def demo_mig(kube_sandbox, django_capture_on_commit_callbacks, eager_tasks):
    """The demo data, cluster demo-mig on the sandbox, synced once: team-c-dev has 2/4 slices,
    pods of at most 1, class experiment only."""
    from django.core.management import call_command

    from quotas.kube.client import KubeClient

    call_command("seed_demo", verbosity=0)
    cluster = Cluster.objects.get(name="demo-mig")
    Cluster.objects.filter(pk=cluster.pk).update(sandbox_url=kube_sandbox.url)
    kube = KubeClient.for_url(kube_sandbox.url)
    kube.apply(  # YuniKorn's own namespace, where the portal keeps its queue ConfigMap
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "yunikorn"}},
        field_manager="helm",
    )
    kube.close()
    _sync(cluster, django_capture_on_commit_callbacks)
    return cluster


def _on_cluster(kube_sandbox) -> tuple[str | None, list[str]]:
    """team-c-dev's per-pod max of MIG slices and the classes allowed to use them, as the
    sandbox holds them (the Namespace annotation, the zero quota of every other class)."""
    from quotas.kube.render import OTHER_CLASSES_QUOTA_NAME, per_pod_max_annotation

    ns = kube_sandbox.get_object("v1", "Namespace", "team-c-dev")
    per_pod = ns["metadata"].get("annotations", {}).get(per_pod_max_annotation(MIG))
    others = kube_sandbox.get_object("v1", "ResourceQuota", OTHER_CLASSES_QUOTA_NAME, "team-c-dev")
    [scope] = others["spec"]["scopeSelector"]["matchExpressions"]
    assert scope["operator"] == "NotIn" and others["spec"]["hard"] == {f"requests.{MIG}": "0"}
    return per_pod, scope["values"]


def test_a_grant_widening_per_pod_max_and_classes_ends_whatever_changed_meanwhile(
    demo_mig, kube_sandbox, django_capture_on_commit_callbacks
):
    """The report of issue 25: a grant raises the per-pod max 1 → 4 (and allows training);
    while it runs the lead lowers the guarantee permanently (approved automatically). At the
    end the per-pod max and the classes come back, in the database and on the cluster, and the
    lower guarantee stays."""
    from django.contrib.auth.models import User

    from approvals.lifecycle import request_create
    from approvals.lines import LineInput
    from quotas.models import Resource, TeamNamespace

    users = {u.username: u for u in User.objects.all()}
    ns = TeamNamespace.objects.get(cluster=demo_mig, name="team-c-dev")
    mig = Resource.objects.get(name=MIG)
    assert _on_cluster(kube_sandbox) == ("1", ["experiment"])

    grant = request_create(
        team=ns.team,
        acting_user=users["lead-c"],
        justification="a large evaluation this week",
        lines=[
            LineInput(
                ns.pk, mig.pk, 2, 4, per_pod_max=4, priority_classes=("experiment", "training")
            )
        ],
        kind="temporary",
        ends_at=timezone.now() + timedelta(hours=30),
        submit=True,
    )
    assert grant.approvals_needed == 2  # training outranks experiment
    request_approve(request=grant, acting_user=users["admin"])
    request_approve(request=grant, acting_user=users["admin2"])
    _sync(demo_mig, django_capture_on_commit_callbacks)
    grant.refresh_from_db()
    assert grant.status == S.ACTIVE
    assert _on_cluster(kube_sandbox) == ("4", ["experiment", "training"])

    lower = request_create(
        team=ns.team,
        acting_user=users["lead-c"],
        justification="fewer guaranteed slices",
        lines=[LineInput(ns.pk, mig.pk, 1, 4)],  # per-pod max and classes left as they are
        submit=True,
    )
    assert lower.auto_approved
    allocation = Allocation.objects.get(team_namespace=ns, resource=mig)
    assert (allocation.guarantee, allocation.per_pod_max, allocation.version) == (1, 4, 3)

    with django_capture_on_commit_callbacks(execute=True):
        assert requests_expire_due(now=grant.ends_at + timedelta(minutes=1)) == [grant.pk]
    allocation.refresh_from_db()
    assert (allocation.guarantee, allocation.cap, allocation.per_pod_max) == (1, 4, 1)
    assert allocation.priority_classes == ["experiment"]
    assert allocation.version == 4
    assert allocation.versions.get(version=4).source == f"request:{grant.pk}:expired"
    # The event says what was taken back, and that the guarantee was someone else's change.
    event = AuditEvent.objects.get(action="request.expired", target_id=str(grant.pk))
    assert event.comment == (
        "team-c-dev nvidia.com/mig-1g.10gb: took back per-pod max 4 → 1, priority classes "
        "experiment, training → experiment (changed during the grant: guarantee; those keep "
        "their own change)"
    )
    [line] = event.after["taken_back"]
    assert line["fields"] == {
        "per_pod_max": {"from": "4", "to": "1"},
        "priority_classes": {"from": "experiment, training", "to": "experiment"},
    }
    assert line["changed_during_grant"] == ["guarantee"]
    changed = AuditEvent.objects.filter(action="allocation.changed").latest("seq")
    assert (changed.before["per_pod_max"], changed.after["per_pod_max"]) == ("4", "1")
    _sync(demo_mig, django_capture_on_commit_callbacks)
    assert _on_cluster(kube_sandbox) == ("1", ["experiment"])


@pytest.fixture
def team_c_pods_of_one(plan, gpu, admin):
    """team-c-dev 2/4, pods of at most 1 GPU."""
    allocation_set(
        team_namespace=plan["team-c"],
        resource=gpu,
        guarantee=2,
        cap=4,
        per_pod_max=1,
        acting_user=admin,
    )
    return plan["team-c"]


def _active_grant(lead, ns, gpu, admin, guarantee, cap, per_pod_max):
    grant = new_request(
        lead,
        ns,
        gpu,
        guarantee,
        cap,
        kind="temporary",
        ends_in=timedelta(hours=3),
        per_pod_max=per_pod_max,
    )
    request_submit(request=grant, acting_user=lead)
    request_approve(request=grant, acting_user=admin)
    QuotaRequest.objects.filter(pk=grant.pk).update(status=S.ACTIVE)
    return grant


@pytest.mark.parametrize(
    ("during", "ends"),
    [
        (4, 2),  # a permanent raise to 4 during a 1 → 3 grant keeps its own step: 1 + 1
        (2, 1),  # a permanent lowering to 2 during it: never wider than before the grant
        (None, None),  # the max removed by admins during it: stays removed
    ],
)
def test_a_per_pod_max_changed_permanently_during_the_grant_loses_only_the_grants_share(
    team_c_pods_of_one, lead_c, gpu, admin, admin2, strict_policy, during, ends
):
    ns = team_c_pods_of_one
    grant = _active_grant(lead_c, ns, gpu, admin, 2, 4, 3)
    change = request_submit(
        request=new_request(lead_c, ns, gpu, 2, 4, per_pod_max=during), acting_user=lead_c
    )
    request_approve(request=change, acting_user=admin2)
    assert Allocation.objects.get(team_namespace=ns).per_pod_max == during
    requests_expire_due(now=grant.ends_at + timedelta(seconds=1))
    allocation = Allocation.objects.get(team_namespace=ns)
    assert (allocation.guarantee, allocation.cap, allocation.per_pod_max) == (2, 4, ends)
    event = AuditEvent.objects.get(action="request.expired", target_id=str(grant.pk))
    [line] = event.after["taken_back"]
    assert line["changed_during_grant"] == ["per_pod_max"]
    shown = {None: "none"}
    if during != ends:
        assert line["fields"] == {
            "per_pod_max": {"from": shown.get(during, str(during)), "to": str(ends)}
        }
    else:
        assert line["fields"] == {} and "took back nothing" in event.comment


def test_an_unchanged_allocation_is_restored_exactly_and_the_event_says_so(
    team_c_pods_of_one, lead_c, gpu, admin, strict_policy
):
    ns = team_c_pods_of_one
    grant = _active_grant(lead_c, ns, gpu, admin, 3, 4, 3)
    requests_expire_due(now=grant.ends_at + timedelta(seconds=1))
    allocation = Allocation.objects.get(team_namespace=ns)
    assert (allocation.guarantee, allocation.cap, allocation.per_pod_max) == (2, 4, 1)
    event = AuditEvent.objects.get(action="request.expired", target_id=str(grant.pk))
    assert (
        event.comment == "team-c-dev nvidia.com/gpu: took back guarantee 3 → 2, per-pod max 3 → 1"
    )
    assert event.after["taken_back"][0]["changed_during_grant"] == []


# The rule itself (approvals.grants.grant_end_values), field by field.

KNOWN = ["production-inference", "training", "experiment"]


def v(guarantee, cap, per_pod_max=None, classes=()):
    return {
        "guarantee": D(guarantee),
        "cap": D(cap),
        "per_pod_max": None if per_pod_max is None else D(per_pod_max),
        "priority_classes": sorted(classes),
    }


EXP, TRAIN, PROD = "experiment", "training", "production-inference"


@pytest.mark.parametrize(
    ("before", "granted", "now", "ends"),
    [
        # Another field changed meanwhile: every field the grant widened comes back.
        (v(2, 4, 1, [EXP]), v(2, 4, 4, [EXP]), v(1, 4, 4, [EXP]), v(1, 4, 1, [EXP])),
        (v(2, 4, 1, [EXP]), v(2, 4, 1, [EXP, TRAIN]), v(1, 4, 1, [EXP, TRAIN]), v(1, 4, 1, [EXP])),
        (v(2, 4, 1, [EXP]), v(2, 4, None, []), v(1, 4, None, []), v(1, 4, 1, [EXP])),
        # Amounts: the grant's change comes off the value now (a lowering it made comes back).
        (v(2, 4), v(4, 6), v(4, 7), v(2, 5)),
        (v(2, 4), v(4, 6), v(3, 6), v(1, 4)),
        (v(6, 10), v(2, 10), v(1, 10), v(5, 10)),
        # The same per-pod max changed permanently during the grant.
        (v(2, 8, 1), v(2, 8, 4), v(2, 8, 6), v(2, 8, 3)),
        (v(2, 8, 1), v(2, 8, 4), v(2, 8, 2), v(2, 8, 1)),
        (v(2, 8, 3), v(2, 8, 6), v(2, 8, 2), v(2, 8, 2)),
        (v(2, 8, 1), v(2, 8, None), v(2, 8, 3), v(2, 8, 1)),
        (v(2, 8, 1), v(2, 8, 4), v(2, 8, None), v(2, 8, None)),
        # A per-pod max the grant did not widen: as it is now.
        (v(2, 8, 4), v(3, 8, 4), v(3, 8, 2), v(2, 8, 2)),
        (v(2, 8, 4), v(2, 8, 2), v(2, 8, 2), v(2, 8, 4)),
        # The same classes changed permanently during the grant: only the grant's go.
        (
            v(2, 4, None, [EXP]),
            v(2, 4, None, [EXP, TRAIN]),
            v(2, 4, None, [EXP, PROD, TRAIN]),
            v(2, 4, None, [EXP, PROD]),
        ),
        (
            v(2, 4, None, [EXP]),
            v(2, 4, None, [EXP, TRAIN]),
            v(2, 4, None, []),
            v(2, 4, None, [EXP, PROD]),
        ),
        (v(2, 4, None, [EXP]), v(2, 4, None, []), v(2, 4, None, [TRAIN]), v(2, 4, None, [EXP])),
        (
            v(2, 4, None, [EXP, TRAIN]),
            v(2, 4, None, [EXP, TRAIN, PROD]),
            v(2, 4, None, [PROD]),
            v(2, 4, None, [EXP, TRAIN]),
        ),
        # A grant for an allocation that allowed nothing: nothing the grant allowed stays.
        (v(0, 0), v(0, 2, None, [PROD]), v(0, 3, None, [PROD]), v(0, 0, None, [PROD])),
        (v(0, 0), v(0, 2, None, [PROD]), v(0, 3, None, [EXP, PROD]), v(0, 1, None, [EXP])),
        (v(0, 0), v(0, 2), v(0, 3, 2), v(0, 0)),
    ],
)
def test_grant_end_values(before, granted, now, ends):
    from approvals.grants import grant_end_values

    assert grant_end_values(before=before, granted=granted, now=now, known_classes=KNOWN) == ends
