"""Deciding several requests at once from the queue: each through the single decision's
service, one outcome per request; platform admins only; two admins on overlapping sets at
the same moment (threads with their own connections) neither double-approve nor deadlock."""

import pytest
from django.test import Client

from approvals.bulk import requests_decide_many
from approvals.lifecycle import request_submit
from approvals.models import ApprovalPolicy, QuotaRequest
from common.errors import PermissionDenied, ValidationFailed
from quotas.models import Allocation, AuditEvent, TeamNamespace
from quotas.services import allocation_set
from tests.support.races import guaranteed, race
from tests.support.requests import new_request

S = QuotaRequest.Status


def waiting(lead, ns, gpu, guarantee, cap) -> QuotaRequest:
    return request_submit(request=new_request(lead, ns, gpu, guarantee, cap), acting_user=lead)


def small_teams(plan, cluster, gpu, admin, lead_c, n):
    """n more namespaces of team-c with 0/1 each (room for small increases)."""
    team = plan["team-c"].team
    spaces = []
    for i in range(n):
        ns = TeamNamespace.objects.create(team=team, cluster=cluster, name=f"team-c-extra-{i}")
        allocation_set(team_namespace=ns, resource=gpu, guarantee=0, cap=1, acting_user=admin)
        spaces.append(ns)
    return spaces


@pytest.mark.django_db
def test_each_request_gets_its_own_outcome(plan, lead_c, gpu, admin, strict_policy):
    ordinary = waiting(lead_c, plan["team-c"], gpu, 3, 4)
    own = waiting(admin, plan["team-b"], gpu, 5, 6)  # the admin's own request
    outcomes = requests_decide_many(
        request_ids=[own.pk, ordinary.pk, 999999, ordinary.pk], acting_user=admin, action="approve"
    )
    by_id = {o.request_id: o for o in outcomes}
    assert [o.request_id for o in outcomes] == sorted(by_id)  # ascending, each once
    assert by_id[ordinary.pk].outcome == "approved"
    assert by_id[own.pk].outcome == "refused"
    assert "nobody approves their own request" in by_id[own.pk].message
    assert by_id[999999].outcome == "refused"
    ordinary.refresh_from_db()
    own.refresh_from_db()
    assert ordinary.status == S.APPLYING and own.status == S.SUBMITTED
    approved = AuditEvent.objects.filter(action="request.approved", target_id=str(ordinary.pk))
    assert approved.count() == 1 and approved.get().actor == admin


@pytest.mark.django_db
def test_a_request_needing_two_admins_waits_for_the_second(
    plan, lead_c, gpu, admin, admin2, cluster
):
    ApprovalPolicy.objects.create(
        cluster=cluster,
        auto_approve_decreases=False,
        auto_approve_increase_max=0,
        two_admins_above=1,
    )
    big = waiting(lead_c, plan["team-c"], gpu, 4, 6)  # +2 guarantee: above 1
    [first] = requests_decide_many(request_ids=[big.pk], acting_user=admin, action="approve")
    assert first.outcome == "waiting" and "1 of 2" in first.message
    [again] = requests_decide_many(request_ids=[big.pk], acting_user=admin, action="approve")
    assert again.outcome == "refused" and "a second admin must approve" in again.message
    [second] = requests_decide_many(request_ids=[big.pk], acting_user=admin2, action="approve")
    assert second.outcome == "approved"
    big.refresh_from_db()
    assert big.status == S.APPLYING and big.approvals.count() == 2


@pytest.mark.django_db
def test_a_request_that_no_longer_fits_is_refused_with_the_plan_reason(
    plan, lead_c, gpu, admin, admin2, strict_policy
):
    first = waiting(lead_c, plan["team-c"], gpu, 6, 8)  # 12 → 16 of 16 guaranteed
    second = waiting(admin2, plan["team-b"], gpu, 5, 6)  # +1: over the capacity after the first
    outcomes = requests_decide_many(
        request_ids=[first.pk, second.pk], acting_user=admin, action="approve"
    )
    assert [o.outcome for o in outcomes] == ["approved", "refused"]
    assert "capacity" in outcomes[1].message
    assert guaranteed(plan["team-c"].cluster) <= 16


@pytest.mark.django_db
def test_reject_needs_a_comment_and_only_admins_decide(
    plan, lead_c, gpu, admin, auditor, strict_policy
):
    request = waiting(lead_c, plan["team-c"], gpu, 3, 4)
    with pytest.raises(ValidationFailed) as no_reason:
        requests_decide_many(request_ids=[request.pk], acting_user=admin, action="reject")
    assert no_reason.value.field == "comment"
    for person in (lead_c, auditor):
        with pytest.raises(PermissionDenied):
            requests_decide_many(request_ids=[request.pk], acting_user=person, action="approve")
    [rejected] = requests_decide_many(
        request_ids=[request.pk], acting_user=admin, action="reject", comment="next quarter"
    )
    assert rejected.outcome == "rejected"
    request.refresh_from_db()
    assert (request.status, request.decision_comment) == (S.REJECTED, "next quarter")


@pytest.mark.django_db
def test_the_queue_post_is_for_platform_admins_only(
    plan, lead_c, gpu, auditor, admin, strict_policy
):
    request = waiting(lead_c, plan["team-c"], gpu, 3, 4)
    for person in (lead_c, auditor):
        client = Client()
        client.force_login(person)
        answer = client.post("/requests/bulk/", {"ids": [request.pk], "action": "approve"})
        assert answer.status_code == 403
    request.refresh_from_db()
    assert request.status == S.SUBMITTED
    client = Client()
    client.force_login(admin)
    hostile = client.post("/requests/bulk/", {"ids": ["1 OR 1", "\x00"], "action": "approve"})
    assert hostile.status_code in (302, 400)  # refused, never a 500
    answer = client.post(
        "/requests/bulk/",
        {"ids": [request.pk], "action": "approve", "next": "https://elsewhere.example/"},
    )
    assert answer.status_code == 302 and answer["Location"] == "/requests/?waiting=on"
    request.refresh_from_db()
    assert request.status == S.APPLYING


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(3))
def test_two_admins_bulk_approving_overlapping_sets(
    round_, plan, lead_c, gpu, admin, admin2, cluster, strict_policy
):
    spaces = small_teams(plan, cluster, gpu, admin, lead_c, 4)
    requests = [waiting(lead_c, ns, gpu, 1, 1) for ns in spaces]  # +1 guarantee each
    ids = [r.pk for r in requests]
    results: dict[str, list] = {}

    def bulk(name, user, chosen):
        def move():
            results[name] = requests_decide_many(
                request_ids=chosen, acting_user=user, action="approve"
            )

        return move

    # Overlapping, in opposite orders: {0,1,2} and {3,2,1}.
    outcomes = race(
        bulk("admin", admin, ids[:3]),
        bulk("admin2", admin2, list(reversed(ids[1:]))),
    )
    assert outcomes == ["ok", "ok"], outcomes  # no crash, no deadlock
    approved_by = {}
    for name, found in results.items():
        for outcome in found:
            if outcome.outcome == "approved":
                approved_by.setdefault(outcome.request_id, []).append(name)
            else:
                assert outcome.outcome == "refused", outcome
    # Each request approved exactly once, by one of the two, the other told why not.
    assert sorted(approved_by) == ids and all(len(v) == 1 for v in approved_by.values())
    for request in requests:
        request.refresh_from_db()
        assert request.status == S.APPLYING
        assert request.approvals.count() == 1
        trail = list(
            AuditEvent.objects.filter(
                target_type="QuotaRequest", target_id=str(request.pk)
            ).values_list("action", flat=True)
        )
        assert trail.count("request.approved") == 1 and trail.count("request.applying") == 1
        allocation = Allocation.objects.get(team_namespace=request.lines.get().team_namespace)
        assert (allocation.guarantee, allocation.version) == (1, 2)
    assert guaranteed(cluster) <= 16


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(3))
def test_two_admins_bulk_approving_for_the_same_last_gpus(
    round_, plan, lead_c, gpu, admin, admin2, cluster, strict_policy
):
    # 12 of 16 guaranteed: room for 4 more; six requests of +1 each, both admins take all.
    spaces = small_teams(plan, cluster, gpu, admin, lead_c, 6)
    ids = [waiting(lead_c, ns, gpu, 1, 1).pk for ns in spaces]
    outcomes = race(
        lambda: requests_decide_many(request_ids=ids, acting_user=admin, action="approve"),
        lambda: requests_decide_many(request_ids=ids[::-1], acting_user=admin2, action="approve"),
    )
    assert outcomes == ["ok", "ok"], outcomes
    assert guaranteed(cluster) == 16  # exactly the capacity, never more
    statuses = sorted(QuotaRequest.objects.filter(pk__in=ids).values_list("status", flat=True))
    assert statuses == [S.APPLYING] * 4 + [S.SUBMITTED] * 2
