"""The request lifecycle: every allowed and forbidden move, validation, deciding, applying."""

from decimal import Decimal

import pytest
from django.db import transaction

from approvals.lifecycle import (
    request_approve,
    request_changes,
    request_create,
    request_rebase,
    request_reject,
    request_revise,
    request_submit,
    request_withdraw,
    requests_follow_syncs,
)
from approvals.lines import Decision, LineInput
from approvals.locks import lock_request
from approvals.models import QuotaRequest
from approvals.transitions import S, transition
from common.errors import NotAllowed, PermissionDenied, ValidationFailed
from quotas.models import Allocation, AuditEvent, SyncRequest
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db

# The lifecycle as the product spec states it, written out here rather than read from the
# code's own table: draft → submitted → approved | rejected | changes_requested; withdrawn by
# the requester; approved → applying → applied | failed; failed retries; temporary grants →
# active → expired. Plus: an approved grant waiting for its start may be withdrawn by its
# requester or revoked by an admin (it never applied anything), and it fails without applying
# anything when it no longer holds at its start. An approved extension of a running grant
# moves the grant's end and is applied at once (it writes nothing to a cluster).
EXPECTED: dict[str, set[str]] = {
    "draft": {"submitted", "withdrawn"},
    "submitted": {"approved", "rejected", "changes_requested", "withdrawn"},
    "changes_requested": {"submitted", "withdrawn"},
    "approved": {"applying", "applied", "failed", "withdrawn", "revoked"},
    "applying": {"applied", "failed", "active"},
    "failed": {"applying", "applied", "active"},  # retried; a retry that succeeds moves on
    "active": {"expired"},
    "applied": set(),
    "rejected": set(),
    "withdrawn": set(),
    "revoked": set(),
    "expired": set(),
}
ALL = list(EXPECTED)
PAIRS = [(a, b) for a in ALL for b in ALL if a != b]


def test_the_table_covers_every_status():
    assert set(EXPECTED) == {s.value for s in S}


@pytest.mark.parametrize(("source", "target"), PAIRS)
def test_every_transition_is_allowed_or_refused_as_the_product_says(
    source, target, plan, lead_a, gpu, admin2
):
    request = new_request(lead_a, plan["team-a"], gpu, 6, 8)
    QuotaRequest.objects.filter(pk=request.pk).update(status=source)
    already = AuditEvent.objects.count()
    with transaction.atomic():
        locked = lock_request(request.pk)
        if target in EXPECTED[source]:
            transition(locked, target, acting_user=admin2, comment="move")
            ok = True
        else:
            with pytest.raises(NotAllowed) as err:
                transition(locked, target, acting_user=admin2)
            assert f"it cannot become {S(target).label}" in err.value.message
            ok = False
    request.refresh_from_db()
    assert request.status == (target if ok else source)
    events = AuditEvent.objects.order_by("id")[already:]
    assert len(events) == (1 if ok else 0)
    if ok:
        [event] = events
        assert event.action == f"request.{target}"
        assert (event.before, event.after["status"], event.actor) == (
            {"status": source},
            target,
            admin2,
        )


@pytest.mark.django_db(transaction=True)
def test_transition_outside_a_transaction_is_refused(plan, lead_a, gpu):
    request = new_request(lead_a, plan["team-a"], gpu, 6, 8)
    with pytest.raises(RuntimeError):
        transition(request, S.SUBMITTED, acting_user=lead_a)


def test_submit_refuses_a_cap_above_the_share_with_the_numbers(plan, lead_c, gpu, strict_policy):
    request = new_request(lead_c, plan["team-c"], gpu, 2, 9)
    with pytest.raises(ValidationFailed) as err:
        request_submit(request=request, acting_user=lead_c)
    assert err.value.message == (
        "cap 9 exceeds 50% of cluster demo capacity 16 nvidia.com/gpu (max 8)"
    )
    assert err.value.field == "cap"
    request.refresh_from_db()
    assert request.status == S.DRAFT  # nothing lost, still editable


def test_submit_refuses_guarantees_beyond_capacity(plan, lead_c, gpu, strict_policy):
    request = new_request(lead_c, plan["team-c"], gpu, 8, 8)  # 6 + 4 + 8 = 18 > 16
    with pytest.raises(ValidationFailed) as err:
        request_submit(request=request, acting_user=lead_c)
    assert "sum to 18 nvidia.com/gpu, above its capacity 16" in err.value.message
    assert err.value.extra["errors"][0]["rule"] == "guarantees_le_capacity"


def test_submit_records_warnings_and_snapshots(plan, lead_c, gpu, strict_policy):
    request = new_request(lead_c, plan["team-c"], gpu, 5, 6)  # guarantee ×2.5: a large jump
    request_submit(request=request, acting_user=lead_c)
    request.refresh_from_db()
    assert request.status == S.SUBMITTED
    [jump] = [f for f in request.findings if f["rule"] == "large_jump"]
    assert (jump["level"], jump["message"]) == ("warning", "guarantee rises from 2 to 5 (×2.5)")
    line = request.lines.get()
    assert (line.current_guarantee, line.current_cap) == (2, 4)
    assert (line.requested_guarantee, line.requested_cap) == (5, 6)
    assert {a["namespace"] for a in request.usage_snapshot["allocations"]} == {"team-c-dev"}
    # No cluster runs here: the snapshot says so instead of failing the submission.
    [usage] = request.usage_snapshot["usage"]["namespaces"]
    assert usage["namespace"] == "team-c-dev" and "unreachable" in usage["error"]


def test_leads_request_only_for_their_own_team(plan, lead_a, gpu, member_a):
    with pytest.raises(PermissionDenied):
        new_request(lead_a, plan["team-b"], gpu, 4, 5)
    with pytest.raises(PermissionDenied):
        new_request(member_a, plan["team-a"], gpu, 6, 8)


def test_bad_line_values_name_the_line_and_field(plan, lead_a, gpu):
    with pytest.raises(ValidationFailed) as err:
        new_request(lead_a, plan["team-a"], gpu, 9, 8)
    assert err.value.field == "lines[0].guarantee"
    assert "guarantee 9 exceeds cap 8" in err.value.message
    assert not QuotaRequest.objects.exists()


def test_temporary_request_needs_a_future_end(plan, lead_a, gpu):
    from datetime import timedelta

    with pytest.raises(ValidationFailed) as err:
        new_request(lead_a, plan["team-a"], gpu, 6, 8, kind="temporary")
    assert err.value.field == "ends_at"
    with pytest.raises(ValidationFailed):
        new_request(
            lead_a, plan["team-a"], gpu, 6, 8, kind="temporary", ends_in=-timedelta(hours=1)
        )


def test_nobody_approves_their_own_request(plan, admin, gpu, strict_policy):
    request = new_request(admin, plan["team-c"], gpu, 2, 5)
    request_submit(request=request, acting_user=admin)
    with pytest.raises(PermissionDenied, match="own request"):
        request_approve(request=request, acting_user=admin)


def test_team_leads_and_auditors_cannot_decide(plan, lead_c, lead_a, auditor, gpu, strict_policy):
    request = new_request(lead_c, plan["team-c"], gpu, 2, 5)
    request_submit(request=request, acting_user=lead_c)
    for user in (lead_a, auditor):
        with pytest.raises(PermissionDenied):
            request_approve(request=request, acting_user=user)
        with pytest.raises(PermissionDenied):
            request_reject(request=request, acting_user=user, comment="no")


def test_one_admin_approves_an_ordinary_change(plan, lead_c, gpu, admin2, strict_policy):
    request = new_request(lead_c, plan["team-c"], gpu, 3, 6)
    request_submit(request=request, acting_user=lead_c)
    request_approve(request=request, acting_user=admin2, comment="ok")
    request.refresh_from_db()
    assert request.status == S.APPLYING
    allocation = Allocation.objects.get(team_namespace=plan["team-c"])
    assert (allocation.guarantee, allocation.cap, allocation.version) == (3, 6, 2)
    version = allocation.versions.get(version=2)
    assert version.source == f"request:{request.pk}" and version.changed_by == admin2
    [sync] = request.sync_requests.all()
    assert sync.status == SyncRequest.Status.PENDING
    actions = list(
        AuditEvent.objects.filter(target_id=str(request.pk), target_type="QuotaRequest")
        .order_by("id")
        .values_list("action", flat=True)
    )
    assert actions == ["request.draft", "request.submitted", "request.approved", "request.applying"]


def test_two_distinct_admins_above_the_threshold(plan, lead_c, gpu, admin, admin2):
    request = new_request(lead_c, plan["team-c"], gpu, 2, 8)  # cap +4... threshold 4: one admin
    request_submit(request=request, acting_user=lead_c)
    request.refresh_from_db()
    assert request.approvals_needed == 1
    request_reject(request=request, acting_user=admin, comment="not now")

    big = new_request(lead_c, plan["team-c"], gpu, 2, 8)
    request_revise(
        request=big, acting_user=lead_c, lines=[LineInput(plan["team-c"].pk, gpu.pk, 1, 8)]
    )
    from approvals.models import ApprovalPolicy

    ApprovalPolicy.objects.create(cluster=plan["team-c"].cluster, two_admins_above=3)
    request_submit(request=big, acting_user=lead_c)
    big.refresh_from_db()
    assert big.approvals_needed == 2
    request_approve(request=big, acting_user=admin)
    big.refresh_from_db()
    assert big.status == S.SUBMITTED  # one of two
    with pytest.raises(PermissionDenied, match="second admin"):
        request_approve(request=big, acting_user=admin)
    request_approve(request=big, acting_user=admin2)
    big.refresh_from_db()
    assert big.status == S.APPLYING
    assert set(big.approvals.values_list("admin__username", flat=True)) == {"admin", "admin2"}


def test_admin_approves_a_modified_amount_and_all_three_are_kept(
    plan, lead_c, gpu, admin, strict_policy
):
    request = new_request(lead_c, plan["team-c"], gpu, 4, 8)
    request_submit(request=request, acting_user=lead_c)
    line = request.lines.get()
    request_approve(
        request=request, acting_user=admin, decisions=[Decision(line.pk, guarantee=3, cap=6)]
    )
    line.refresh_from_db()
    assert (line.current_guarantee, line.current_cap) == (2, 4)
    assert (line.requested_guarantee, line.requested_cap) == (4, 8)
    assert (line.decided_guarantee, line.decided_cap) == (3, 6)
    allocation = Allocation.objects.get(team_namespace=plan["team-c"])
    assert (allocation.guarantee, allocation.cap) == (3, 6)


def test_decided_values_are_validated_again(plan, lead_c, gpu, admin, strict_policy):
    request = new_request(lead_c, plan["team-c"], gpu, 3, 6)
    request_submit(request=request, acting_user=lead_c)
    line = request.lines.get()
    with pytest.raises(ValidationFailed, match="exceeds 50%"):
        request_approve(
            request=request, acting_user=admin, decisions=[Decision(line.pk, guarantee=3, cap=12)]
        )
    request.refresh_from_db()
    assert request.status == S.SUBMITTED and not request.approvals.exists()
    assert Allocation.objects.get(team_namespace=plan["team-c"]).cap == 4


def test_decrease_is_auto_approved_and_applied(plan, lead_a, gpu):
    request = new_request(lead_a, plan["team-a"], gpu, 4, 8)
    request_submit(request=request, acting_user=lead_a)
    request.refresh_from_db()
    assert request.auto_approved and request.status == S.APPLYING
    assert Allocation.objects.get(team_namespace=plan["team-a"]).cap == 8


def test_small_increase_within_free_capacity_is_auto_approved(plan, lead_c, gpu):
    request = new_request(lead_c, plan["team-c"], gpu, 3, 5)
    request_submit(request=request, acting_user=lead_c)
    request.refresh_from_db()
    assert request.auto_approved and request.status == S.APPLYING


def test_reject_and_request_changes_need_a_reason(plan, lead_c, gpu, admin, strict_policy):
    request = new_request(lead_c, plan["team-c"], gpu, 3, 6)
    request_submit(request=request, acting_user=lead_c)
    with pytest.raises(ValidationFailed, match="why"):
        request_reject(request=request, acting_user=admin, comment=" ")
    request_changes(request=request, acting_user=admin, comment="split it in two")
    request.refresh_from_db()
    assert request.status == S.CHANGES_REQUESTED
    request_revise(
        request=request, acting_user=lead_c, lines=[LineInput(plan["team-c"].pk, gpu.pk, 3, 5)]
    )
    request_submit(request=request, acting_user=lead_c)
    request.refresh_from_db()
    assert request.status in (S.SUBMITTED, S.APPLYING)


def test_withdraw_only_by_the_requester_and_only_before_a_decision(
    plan, lead_c, gpu, admin, strict_policy
):
    request = new_request(lead_c, plan["team-c"], gpu, 3, 6)
    request_submit(request=request, acting_user=lead_c)
    with pytest.raises(PermissionDenied):
        request_withdraw(request=request, acting_user=admin)
    request_withdraw(request=request, acting_user=lead_c)
    request.refresh_from_db()
    assert request.status == S.WITHDRAWN
    with pytest.raises(NotAllowed, match="cannot become submitted"):
        request_submit(request=request, acting_user=lead_c)


def test_request_follows_its_sync_to_applied_or_failed(plan, lead_c, gpu, admin, strict_policy):
    request = new_request(lead_c, plan["team-c"], gpu, 3, 6)
    request_submit(request=request, acting_user=lead_c)
    request_approve(request=request, acting_user=admin)
    sync = request.sync_requests.get()
    SyncRequest.objects.filter(pk=sync.pk).update(status="failed", last_error="500 boom")
    assert requests_follow_syncs() == [request.pk]
    request.refresh_from_db()
    assert request.status == S.FAILED
    assert "500 boom" in AuditEvent.objects.filter(action="request.failed").get().comment
    SyncRequest.objects.filter(pk=sync.pk).update(status="done")
    requests_follow_syncs()
    request.refresh_from_db()
    assert request.status == S.APPLIED


def test_a_draft_written_against_an_older_allocation_is_rebased_before_submit(
    plan, lead_c, gpu, admin, strict_policy
):
    from quotas.services import allocation_set

    request = new_request(lead_c, plan["team-c"], gpu, 3, 6)
    allocation_set(
        team_namespace=plan["team-c"], resource=gpu, guarantee=1, cap=3, acting_user=admin
    )
    with pytest.raises(NotAllowed) as err:
        request_submit(request=request, acting_user=lead_c)
    assert "guarantee: 2 → 1" in err.value.message
    request_rebase(request=request, acting_user=lead_c)
    request_submit(request=request, acting_user=lead_c)
    line = request.lines.get()
    assert (line.current_guarantee, line.current_cap, line.current_version) == (
        Decimal(1),
        Decimal(3),
        2,
    )
    assert (line.requested_guarantee, line.requested_cap, line.base_version) == (3, 6, 2)


def test_a_lead_cannot_submit_another_teams_request(plan, lead_c, lead_a, gpu):
    request = new_request(lead_c, plan["team-c"], gpu, 3, 5)
    with pytest.raises(PermissionDenied):
        request_submit(request=request, acting_user=lead_a)
    assert request_create  # imported API stays public
