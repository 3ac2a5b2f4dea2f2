"""Moves that can meet, run at the same moment from threads with their own connections.

On PostgreSQL this is real row locking (capacity rows, then the request, then allocations and
clusters, then the audit chain head). Each race asserts the invariants: no over-commitment,
exactly one outcome per request, and audit events that agree with the outcome.
"""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from approvals.grants import requests_expire_due, requests_start_due
from approvals.lifecycle import (
    request_approve,
    request_changes,
    request_create,
    request_revise,
    request_submit,
    request_withdraw,
    requests_follow_syncs,
)
from approvals.lines import LineInput
from approvals.models import QuotaRequest, RequestLine
from quotas.models import Allocation, AuditEvent, SyncRequest, Team, TeamNamespace
from quotas.services import allocation_set
from tests.support.locks import lock_waiters
from tests.support.races import guaranteed, race
from tests.support.requests import new_request
from tests.support.waiting import poll

pytestmark = pytest.mark.django_db(transaction=True)
S = QuotaRequest.Status
ROUNDS = range(3)
REFUSALS = {"ValidationFailed", "NotAllowed", "PermissionDenied"}


def actions(request: QuotaRequest) -> list[str]:
    return list(
        AuditEvent.objects.filter(target_type="QuotaRequest", target_id=str(request.pk))
        .order_by("seq")
        .values_list("action", flat=True)
    )


def assert_audit_matches(request: QuotaRequest) -> None:
    """The request's audit trail tells the same story as its status."""
    request.refresh_from_db()
    trail = actions(request)
    decided = trail.count("request.approved")
    if request.status in (S.APPLYING, S.APPLIED, S.ACTIVE, S.EXPIRED):
        assert decided == 1 and trail.count("request.applying") == 1, trail
    else:
        assert decided == 0 and "request.applying" not in trail, trail
    assert trail[-1] == f"request.{request.status}" or request.status == S.SUBMITTED, trail


@pytest.mark.parametrize("round_", ROUNDS)
def test_approve_vs_withdraw(round_, plan, lead_c, gpu, admin, strict_policy):
    cluster = plan["team-c"].cluster
    request = request_submit(
        request=new_request(lead_c, plan["team-c"], gpu, 3, 4), acting_user=lead_c
    )
    outcomes = race(
        lambda: request_approve(request=request, acting_user=admin),
        lambda: request_withdraw(request=request, acting_user=lead_c),
    )
    assert sorted(outcomes) == ["NotAllowed", "ok"], outcomes  # exactly one move happened
    request.refresh_from_db()
    allocation = Allocation.objects.get(team_namespace=plan["team-c"])
    if outcomes[0] == "ok":
        assert request.status == S.APPLYING
        assert (allocation.guarantee, allocation.version) == (3, 2)
        assert "request.withdrawn" not in actions(request)
    else:
        assert request.status == S.WITHDRAWN
        assert (allocation.guarantee, allocation.version) == (2, 1)
        assert request.approvals.count() == 0
    assert guaranteed(cluster) <= 16
    assert_audit_matches(request)


@pytest.mark.parametrize("round_", ROUNDS)
def test_approve_vs_approve_for_the_same_last_gpus(
    round_, plan, lead_c, other_team_lead, gpu, admin, admin2, strict_policy
):
    cluster = plan["team-c"].cluster
    # 12 of 16 guaranteed; they ask for 3 and 2 more: either fits alone, not both.
    for_c = request_submit(
        request=new_request(lead_c, plan["team-c"], gpu, 5, 5), acting_user=lead_c
    )
    for_b = request_submit(
        request=new_request(other_team_lead, plan["team-b"], gpu, 6, 6),
        acting_user=other_team_lead,
    )
    outcomes = race(
        lambda: request_approve(request=for_c, acting_user=admin),
        lambda: request_approve(request=for_b, acting_user=admin2),
    )
    assert sorted(outcomes) == ["ValidationFailed", "ok"], outcomes
    assert guaranteed(cluster) <= 16
    for request in (for_c, for_b):
        request.refresh_from_db()
    approved = [r for r in (for_c, for_b) if r.status == S.APPLYING]
    assert len(approved) == 1
    for request in (for_c, for_b):
        assert_audit_matches(request)
        if request not in approved:
            assert request.status == S.SUBMITTED and request.approvals.count() == 0


@pytest.mark.parametrize("round_", ROUNDS)
def test_approve_vs_a_temporary_grant_expiring(
    round_, plan, lead_c, lead_a, gpu, admin, admin2, strict_policy
):
    cluster = plan["team-c"].cluster
    # team-a asks for 8 (6 + 4 + 2 = 12 → 14: fits now).
    waiting = request_submit(
        request=new_request(lead_a, plan["team-a"], gpu, 8, 8), acting_user=lead_a
    )
    # Then team-c gets a grant taking the rest: 6 + 4 + 6 = 16. team-a fits only once it ends.
    grant = new_request(
        lead_c, plan["team-c"], gpu, 6, 6, kind="temporary", ends_in=timedelta(hours=2)
    )
    request_submit(request=grant, acting_user=lead_c)
    request_approve(request=grant, acting_user=admin)
    SyncRequest.objects.update(status=SyncRequest.Status.DONE)
    requests_follow_syncs()
    grant.refresh_from_db()
    assert grant.status == S.ACTIVE
    after_end = timezone.now() + timedelta(hours=3)

    outcomes = race(
        lambda: requests_expire_due(now=after_end),
        lambda: request_approve(request=waiting, acting_user=admin2),
    )
    assert outcomes[0] == "ok", outcomes  # the end of a grant is never refused
    assert outcomes[1] in ("ok", "ValidationFailed"), outcomes
    grant.refresh_from_db()
    waiting.refresh_from_db()
    assert grant.status == S.EXPIRED
    c = Allocation.objects.get(team_namespace=plan["team-c"])
    a = Allocation.objects.get(team_namespace=plan["team-a"])
    assert c.guarantee == 2  # reverted either way
    if outcomes[1] == "ok":  # the grant had ended first: its capacity was free
        assert (waiting.status, a.guarantee) == (S.APPLYING, 8)
    else:  # approved while the grant still held the GPUs: refused, nothing promised twice
        assert (waiting.status, a.guarantee) == (S.SUBMITTED, 6)
    assert guaranteed(cluster) <= 16
    assert_audit_matches(waiting)
    assert actions(grant).count("request.expired") == 1


@pytest.mark.parametrize("round_", ROUNDS)
def test_auto_approve_vs_admin_approve(round_, plan, lead_c, other_team_lead, gpu, admin, cluster):
    # Default policy: increases up to 1 are approved automatically while capacity allows.
    big = Team.objects.create(slug="big", name="Big")
    big_ns = TeamNamespace.objects.create(team=big, cluster=cluster, name="big-training")
    allocation_set(team_namespace=big_ns, resource=gpu, guarantee=3, cap=3, acting_user=admin)
    # 6 + 4 + 2 + 3 = 15 of 16: one GPU left.
    for_b = request_submit(
        request=new_request(other_team_lead, plan["team-b"], gpu, 5, 8),
        acting_user=other_team_lead,
    )
    assert for_b.status == S.SUBMITTED  # +2 on the cap: an admin decides
    for_c = new_request(lead_c, plan["team-c"], gpu, 3, 4)  # +1: automatic if it fits

    outcomes = race(
        lambda: request_submit(request=for_c, acting_user=lead_c),
        lambda: request_approve(request=for_b, acting_user=admin),
    )
    assert not any(o.startswith("crash") for o in outcomes), outcomes
    assert set(outcomes) <= {"ok"} | REFUSALS, outcomes
    assert guaranteed(cluster) <= 16
    for_b.refresh_from_db()
    for_c.refresh_from_db()
    got_the_gpu = [r for r in (for_b, for_c) if r.status == S.APPLYING]
    assert len(got_the_gpu) == 1, (outcomes, for_b.status, for_c.status)
    assert guaranteed(cluster) == 16
    if for_c.status == S.APPLYING:
        assert for_c.auto_approved and outcomes[1] == "ValidationFailed"
        assert for_b.status == S.SUBMITTED
    else:
        assert outcomes[1] == "ok"
        assert for_c.status in (S.DRAFT, S.SUBMITTED)  # refused at submit, or waits
    for request in (for_b, for_c):
        assert_audit_matches(request)


@pytest.mark.parametrize("round_", ROUNDS)
def test_a_grant_starting_vs_an_admin_approving_a_change_of_the_same_allocation(
    round_, plan, lead_c, gpu, admin, admin2, strict_policy
):
    ns = plan["team-c"]
    starts = timezone.now() + timedelta(hours=1)
    grant = new_request(
        lead_c, ns, gpu, 3, 5, kind="temporary", starts_at=starts, ends_in=timedelta(hours=6)
    )
    request_submit(request=grant, acting_user=lead_c)
    request_approve(request=grant, acting_user=admin)  # 2/4 → 3/5 from its start
    change = request_submit(request=new_request(lead_c, ns, gpu, 2, 6), acting_user=lead_c)

    outcomes = race(
        lambda: requests_start_due(now=starts + timedelta(minutes=1)),
        lambda: request_approve(request=change, acting_user=admin2),
    )
    assert outcomes[0] == "ok", outcomes  # the start itself never raises
    grant.refresh_from_db()
    change.refresh_from_db()
    allocation = Allocation.objects.get(team_namespace=ns)
    assert grant.status == S.APPLYING
    if outcomes[1] == "ok":
        # The change came first: the grant started on top of it, nothing was lost.
        assert change.status == S.APPLYING
        assert (allocation.guarantee, allocation.cap, allocation.version) == (3, 7, 3)
        line = grant.lines.get()
        assert (line.current_cap, line.base_version) == (6, 2)  # restored at the end
    else:
        # The grant came first: approving the change written against 2/4 would undo it.
        assert outcomes[1] == "NotAllowed", outcomes
        assert change.status == S.SUBMITTED and change.approvals.count() == 0
        assert (allocation.guarantee, allocation.cap, allocation.version) == (3, 5, 2)
    assert guaranteed(ns.cluster) <= 16
    assert_audit_matches(change)
    assert actions(grant).count("request.applying") == 1


@pytest.mark.parametrize("round_", ROUNDS)
def test_removing_a_priority_class_vs_approving_a_request_that_adds_it(
    round_, plan, lead_c, gpu, admin, admin2, strict_policy
):
    from approvals.lifecycle import request_create
    from approvals.lines import LineInput
    from quotas.models import PriorityClass
    from quotas.services import priority_class_delete

    ns = plan["team-c"]
    PriorityClass.objects.create(name="experiment", value=100)
    PriorityClass.objects.create(name="batch", value=50)
    allocation_set(
        team_namespace=ns,
        resource=gpu,
        guarantee=2,
        cap=4,
        priority_classes=["experiment"],
        acting_user=admin,
    )
    batch = PriorityClass.objects.get(name="batch")
    adding = request_create(
        team=ns.team,
        acting_user=lead_c,
        justification="batch jobs at night",
        lines=[LineInput(ns.pk, gpu.pk, 2, 4, priority_classes=("batch", "experiment"))],
        submit=True,
    )
    outcomes = race(
        lambda: priority_class_delete(priority_class=batch, acting_user=admin),
        lambda: request_approve(request=adding, acting_user=admin2),
    )
    assert sorted(outcomes) == ["ValidationFailed", "ok"], outcomes
    allocation = Allocation.objects.get(team_namespace=ns)
    adding.refresh_from_db()
    if outcomes[0] == "ok":  # removed first: the approval refuses the unknown class
        assert not PriorityClass.objects.filter(name="batch").exists()
        assert adding.status == S.SUBMITTED and allocation.priority_classes == ["experiment"]
    else:  # approved first: the class is in use and stays
        assert PriorityClass.objects.filter(name="batch").exists()
        assert allocation.priority_classes == ["batch", "experiment"]
    # Never an allocation allowing a class that no longer exists.
    assert set(allocation.priority_classes) <= set(
        PriorityClass.objects.values_list("name", flat=True)
    )
    assert_audit_matches(adding)


@pytest.mark.parametrize("round_", ROUNDS)
def test_revoking_a_grant_vs_its_start(round_, plan, lead_c, gpu, admin, admin2, strict_policy):
    from approvals.grants import request_revoke

    ns = plan["team-c"]
    starts = timezone.now() + timedelta(hours=1)
    grant = new_request(
        lead_c, ns, gpu, 4, 6, kind="temporary", starts_at=starts, ends_in=timedelta(hours=6)
    )
    request_submit(request=grant, acting_user=lead_c)
    request_approve(request=grant, acting_user=admin)
    outcomes = race(
        lambda: requests_start_due(now=starts + timedelta(minutes=1)),
        lambda: request_revoke(request=grant, acting_user=admin2, comment="needed elsewhere"),
    )
    assert outcomes[0] == "ok" and outcomes[1] in ("ok", "NotAllowed"), outcomes
    grant.refresh_from_db()
    allocation = Allocation.objects.get(team_namespace=ns)
    if outcomes[1] == "ok":  # revoked before it started: nothing applied, nothing synced
        assert grant.status == S.REVOKED
        assert (allocation.guarantee, allocation.version) == (2, 1)
        assert not grant.sync_requests.exists()
    else:  # started first: a started grant is not revoked
        assert grant.status == S.APPLYING
        assert (allocation.guarantee, allocation.version) == (4, 2)
    trail = actions(grant)
    assert trail.count("request.revoked") + trail.count("request.applying") == 1, trail


@pytest.mark.parametrize("round_", ROUNDS)
def test_revise_and_submit_vs_an_approve_of_the_same_request(
    round_, plan, lead_c, gpu, admin, strict_policy
):
    # Sent back for changes; the lead revises and submits while an admin, on a stale page,
    # approves it. Both take the capacity rows before the request row: no deadlock, one story.
    request = request_submit(
        request=new_request(lead_c, plan["team-c"], gpu, 3, 4), acting_user=lead_c
    )
    request_changes(request=request, acting_user=admin, comment="ask for 3/5")
    line = LineInput(team_namespace_id=plan["team-c"].pk, resource_id=gpu.pk, guarantee=3, cap=5)
    outcomes = race(
        lambda: request_revise(request=request, acting_user=lead_c, lines=[line], submit=True),
        lambda: request_approve(request=request, acting_user=admin),
    )
    assert outcomes[0] == "ok", outcomes
    request.refresh_from_db()
    if outcomes[1] == "ok":  # the approval came after the submit: it approved the revision
        assert request.status == S.APPLYING
        assert Allocation.objects.get(team_namespace=plan["team-c"]).cap == 5
    else:
        assert outcomes[1] == "NotAllowed", outcomes
        assert request.status == S.SUBMITTED
    assert_audit_matches(request)


def test_create_and_submit_reads_its_base_after_locking_the_capacity(
    plan, lead_c, gpu, admin, strict_policy
):
    """An approval of the same allocation lands while a create-and-submit builds its lines.
    The create locks the capacity rows before it reads the allocation, so the approval waits
    for it; it used to read first and then refuse its own brand-new request as written
    against an older allocation (a 409 naming a request that was never created).

    The approval starts, on its own connection, once the create has written its lines (seen
    through Django's execute_wrapper on the create's connection); the create goes on once the
    approval waits for a lock (PostgreSQL: a lock wait in pg_stat_activity; SQLite: its
    BEGIN IMMEDIATE or first write, which waits for the create's) or has finished."""
    waiting = request_submit(
        request=new_request(lead_c, plan["team-c"], gpu, 3, 4), acting_user=lead_c
    )
    wrote = threading.Event()
    done = threading.Event()

    def approve():
        def note_writes(execute, sql, params, many, context):
            if sql.lstrip().upper().startswith(("BEGIN", "INSERT", "UPDATE", "DELETE")):
                wrote.set()
            return execute(sql, params, many, context)

        try:
            with connection.execute_wrapper(note_writes):
                request_approve(request=waiting, acting_user=admin)
        finally:
            done.set()
            connection.close()

    approving = threading.Thread(target=approve, daemon=True)

    def approval_held_back() -> bool:
        if connection.vendor == "postgresql":
            return lock_waiters() > 0
        return wrote.is_set()

    def let_the_approval_in_after_the_lines(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if sql.startswith(f'INSERT INTO "{RequestLine._meta.db_table}"') and not approving.ident:
            approving.start()
            poll(
                "the approval waiting or done",
                lambda: done.is_set() or approval_held_back(),
                60,
                0.01,
            )
        return result

    line = LineInput(team_namespace_id=plan["team-c"].pk, resource_id=gpu.pk, guarantee=2, cap=5)
    with connection.execute_wrapper(let_the_approval_in_after_the_lines):
        created = request_create(
            team=plan["team-c"].team,
            acting_user=lead_c,
            justification="a bigger cap",
            lines=[line],
            submit=True,
        )
    assert approving.ident, "the create wrote no request line"
    approving.join(timeout=60)
    assert created.status == S.SUBMITTED
    waiting.refresh_from_db()
    assert waiting.status == S.APPLYING  # after the create committed
    assert_audit_matches(waiting)


# --- the end of a grant vs. a permanent change; a new line vs. the class policy --------------


@pytest.fixture
def classes(db):
    from quotas.models import PriorityClass

    for name, value in (
        ("production-inference", 100000),
        ("training", 10000),
        ("experiment", 1000),
    ):
        PriorityClass.objects.create(name=name, value=value)


@pytest.mark.parametrize("round_", ROUNDS)
def test_a_grant_ending_vs_a_permanent_change_of_the_same_allocation(
    round_, plan, lead_c, gpu, admin, admin2, strict_policy, classes
):
    from approvals.lifecycle import request_create
    from approvals.models import ApprovalPolicy

    ns = plan["team-c"]
    allocation_set(
        team_namespace=ns,
        resource=gpu,
        guarantee=2,
        cap=4,
        per_pod_max=1,
        priority_classes=["experiment"],
        acting_user=admin,
    )  # version 2
    grant = request_create(
        team=ns.team,
        acting_user=lead_c,
        justification="bigger pods for a week",
        lines=[
            LineInput(
                ns.pk, gpu.pk, 2, 4, per_pod_max=3, priority_classes=("experiment", "training")
            )
        ],
        kind="temporary",
        ends_at=timezone.now() + timedelta(hours=2),
        submit=True,
    )
    request_approve(request=grant, acting_user=admin)
    request_approve(request=grant, acting_user=admin2)  # version 3: pods of 3, training too
    SyncRequest.objects.update(status=SyncRequest.Status.DONE)
    requests_follow_syncs()
    # The lead writes a permanent lowering during the grant (decreases apply at once).
    ApprovalPolicy.objects.filter(pk=strict_policy.pk).update(auto_approve_decreases=True)
    lower = request_create(
        team=ns.team,
        acting_user=lead_c,
        justification="fewer guaranteed GPUs",
        lines=[LineInput(ns.pk, gpu.pk, 1, 4)],
    )
    after_end = timezone.now() + timedelta(hours=3)

    outcomes = race(
        lambda: requests_expire_due(now=after_end),
        lambda: request_submit(request=lower, acting_user=lead_c, usage_now={}),
    )
    assert outcomes[0] == "ok", outcomes  # the end of a grant is never refused
    assert outcomes[1] in ("ok", "NotAllowed"), outcomes
    grant.refresh_from_db()
    lower.refresh_from_db()
    allocation = Allocation.objects.get(team_namespace=ns)
    # Either way, what the grant widened is gone.
    assert (allocation.per_pod_max, allocation.priority_classes) == (1, ["experiment"])
    if outcomes[1] == "ok":  # the lowering came first: it stays, the grant's share goes
        assert (lower.status, lower.auto_approved) == (S.APPLYING, True)
        assert (allocation.guarantee, allocation.cap, allocation.version) == (1, 4, 5)
    else:  # the grant ended first: the lowering was written against the granted allocation
        assert lower.status == S.DRAFT
        assert (allocation.guarantee, allocation.cap, allocation.version) == (2, 4, 4)
    # The allocation is its last kept version, written by the end of the grant.
    last = allocation.versions.get(version=allocation.version)
    assert (last.per_pod_max, last.priority_classes) == (1, ["experiment"])
    assert last.source == f"request:{grant.pk}:expired"
    assert grant.status == S.EXPIRED
    [ended] = AuditEvent.objects.filter(action="request.expired", target_id=str(grant.pk))
    [line] = ended.after["taken_back"]
    assert line["fields"]["per_pod_max"] == {"from": "3", "to": "1"}
    assert line["fields"]["priority_classes"] == {
        "from": "experiment, training",
        "to": "experiment",
    }
    assert line["changed_during_grant"] == (["guarantee"] if outcomes[1] == "ok" else [])
    assert_audit_matches(lower)


@pytest.mark.parametrize("round_", ROUNDS)
def test_a_new_line_vs_the_approval_that_creates_its_allocation(
    round_, plan, lead_c, gpu, admin, admin2, classes, cluster
):
    """Two requests for an allocation team-c-dev does not have yet: one allowing experiment
    (approved once, its second approval in the race), one asking production-inference
    (submitted in the race, a small increase the default policy would approve by itself).
    Whichever comes first, nobody gets production-inference: judged from nothing it waits for
    two admins, and written against no allocation it is refused once there is one."""
    from approvals.lifecycle import request_create
    from quotas.models import ClusterCapacity, Resource

    ns = plan["team-c"]
    mig = Resource.objects.create(
        name="nvidia.com/mig-1g.10gb", display_name="1g.10gb", kind=Resource.Kind.MIG
    )
    ClusterCapacity.objects.create(cluster=cluster, resource=mig, capacity=14)
    first = request_create(
        team=ns.team,
        acting_user=lead_c,
        justification="experiments on slices",
        lines=[LineInput(ns.pk, mig.pk, 1, 5, priority_classes=("experiment",))],
        submit=True,
    )
    assert first.approvals_needed == 2  # an increase of 5
    request_approve(request=first, acting_user=admin)
    asked = request_create(
        team=ns.team,
        acting_user=lead_c,
        justification="inference on slices",
        lines=[LineInput(ns.pk, mig.pk, 0, 1, priority_classes=("production-inference",))],
    )

    outcomes = race(
        # The usage snapshot read beforehand: no cluster call delays the submit.
        lambda: request_submit(request=asked, acting_user=lead_c, usage_now={}),
        lambda: request_approve(request=first, acting_user=admin2),
    )
    assert outcomes[1] == "ok", outcomes
    assert outcomes[0] in ("ok", "NotAllowed"), outcomes
    asked.refresh_from_db()
    first.refresh_from_db()
    assert first.status == S.APPLYING
    if outcomes[0] == "ok":  # submitted first: judged from nothing, it waits for two admins
        assert (asked.status, asked.auto_approved, asked.approvals_needed) == (
            S.SUBMITTED,
            False,
            2,
        )
        assert "production-inference (none allowed yet)" in asked.policy_reason
    else:  # the allocation came first: the request was written against none
        assert asked.status == S.DRAFT
    allocation = Allocation.objects.get(team_namespace=ns, resource=mig)
    assert allocation.priority_classes == ["experiment"]  # the top class waits for admins
    assert allocation.version == 1
    assert_audit_matches(first)
    assert_audit_matches(asked)
