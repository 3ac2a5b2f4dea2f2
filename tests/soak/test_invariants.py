"""The soak's end checks catch what they are for: each is fed a state with one violation (and
the same state without it), as plain data; two read a real database state through the
soak's collectors (an over-committed cluster, a request applied twice)."""

from decimal import Decimal
from types import SimpleNamespace

import pytest

from approvals.transitions import ALLOWED
from soak import collect
from soak import invariants as inv

TABLE = {str(k): [str(t) for t in v] for k, v in ALLOWED.items()}
D = Decimal


def values(guarantee, cap, per_pod_max=None, classes=()):
    return (D(guarantee), D(cap), None if per_pod_max is None else D(per_pod_max), tuple(classes))


# --- capacity -------------------------------------------------------------------------------


def change(seq, group, namespace, guarantee, cluster="c", resource="gpu"):
    return inv.GuaranteeChange(seq, str(group), cluster, namespace, resource, D(guarantee))


def test_capacity_holds_within_capacity():
    changes = [change(1, 1, "a", 6), change(2, 1, "b", 4), change(3, 2, "a", 12)]
    assert inv.check_capacity({("c", "gpu"): D(16)}, changes).ok


def test_capacity_catches_an_over_commit_even_when_it_was_undone_later():
    changes = [change(1, 1, "a", 6), change(2, 1, "b", 4), change(3, 2, "a", 13)]
    changes.append(change(4, 3, "a", 6))  # given back later: the over-commit still happened
    result = inv.check_capacity({("c", "gpu"): D(16)}, changes)
    assert result.violations == ["after event 3: guarantees on c gpu add up to 17 of capacity 16"]


def test_capacity_judges_a_transaction_as_a_whole():
    """One request moving 4 GPUs from b to a passes through 20 of 16 inside its transaction:
    nobody else ever saw that."""
    changes = [change(1, 1, "a", 6), change(2, 1, "b", 10), change(3, 2, "a", 10)]
    changes.append(change(4, 2, "b", 6))
    assert inv.check_capacity({("c", "gpu"): D(16)}, changes).ok


def test_capacity_checks_the_allocations_as_they_are_now():
    result = inv.check_capacity({("c", "gpu"): D(16)}, [], {("c", "gpu"): D(17)})
    assert result.violations == ["now: guarantees on c gpu add up to 17 of capacity 16"]


@pytest.mark.django_db
def test_an_over_committed_database_fails_the_capacity_check(cluster, ns_a, ns_b, gpu, admin):
    from quotas.services import allocation_set

    allocation_set(team_namespace=ns_a, resource=gpu, guarantee=10, cap=12, acting_user=admin)
    result = inv.check_capacity(
        collect.capacities(), collect.guarantee_changes(), collect.guaranteed_now()
    )
    assert result.ok, result.violations
    # Written past the request rules (as a bug in an approval path would): 10 + 8 > 16.
    allocation_set(team_namespace=ns_b, resource=gpu, guarantee=8, cap=8, acting_user=admin)
    result = inv.check_capacity(
        collect.capacities(), collect.guarantee_changes(), collect.guaranteed_now()
    )
    assert [v.split(": ", 1)[1] for v in result.violations] == [
        "guarantees on demo nvidia.com/gpu add up to 18 of capacity 16"
    ] * 2


# --- applied exactly as decided ------------------------------------------------------------


def request(id, status, *lines, **more):
    return inv.RequestFacts(id=id, status=status, kind="permanent", lines=lines, **more)


def line(version, final=None, namespace="c/a"):
    return inv.LineFacts(namespace, "gpu", final or values(8, 10), version)


def version(number, source, vals=None, namespace="c/a"):
    return inv.VersionFacts(namespace, "gpu", number, vals or values(8, 10), source)


def test_applied_as_decided_holds():
    requests = [request(1, "applied", line(2)), request(2, "rejected", line(None))]
    versions = [version(1, "seed", values(6, 10)), version(2, "request:1")]
    assert inv.check_applied_as_decided(requests, versions).ok


def test_applied_values_that_differ_from_the_decision_are_caught():
    requests = [request(1, "applied", line(2))]
    result = inv.check_applied_as_decided(requests, [version(2, "request:1", values(8, 12))])
    assert result.violations == [
        "request #1 (applied) c/a gpu: decided 8/10 per-pod - classes any but version 2 "
        "holds 8/12 per-pod - classes any"
    ]


def test_an_applied_line_without_its_version_is_caught():
    result = inv.check_applied_as_decided([request(1, "active", line(None))], [])
    assert result.violations == ["request #1 (active) c/a gpu: no allocation version was applied"]


def test_a_version_written_by_a_rejected_request_is_caught():
    result = inv.check_applied_as_decided(
        [request(3, "rejected", line(None))], [version(5, "request:3")]
    )
    assert result.violations == ["c/a gpu version 5 was written by request #3, which is rejected"]


def test_a_request_applied_twice_is_caught_but_its_revert_is_not_an_apply():
    requests = [request(1, "applied", line(3))]
    twice = [version(2, "request:1"), version(3, "request:1")]
    assert inv.check_applied_as_decided(requests, twice).violations == [
        "request #1 wrote 2 versions of c/a gpu (applied more than once)"
    ]
    reverted = [version(3, "request:1"), version(4, "request:1:expired", values(6, 10))]
    assert inv.check_applied_as_decided(requests, reverted).ok


@pytest.mark.django_db
def test_a_request_applied_twice_in_the_database_is_caught(plan, lead_c, admin):
    """Read through the collectors: a second apply of an approved request (a retried task
    that is not idempotent, say) leaves two versions written by it."""
    from approvals import lifecycle, lines
    from approvals.models import ApprovalPolicy
    from quotas.models import Resource
    from quotas.services import allocation_set

    ApprovalPolicy.objects.create(
        cluster=plan["team-c"].cluster, auto_approve_increase_max=0, auto_approve_decreases=False
    )
    gpu = Resource.objects.get(name="nvidia.com/gpu")
    made = lifecycle.request_create(
        team=plan["team-c"].team,
        acting_user=lead_c,
        justification="more",
        lines=[lines.LineInput(plan["team-c"].pk, gpu.pk, guarantee=3, cap=5)],
        submit=True,
    )
    lifecycle.request_approve(request=made, acting_user=admin)
    assert inv.check_applied_as_decided(collect.requests_facts(), collect.versions_facts()).ok
    allocation_set(
        team_namespace=plan["team-c"],
        resource=gpu,
        guarantee=2,
        cap=5,
        acting_user=None,
        source=f"request:{made.pk}",
    )
    result = inv.check_applied_as_decided(collect.requests_facts(), collect.versions_facts())
    assert (
        f"request #{made.pk} wrote 2 versions of demo/team-c-dev nvidia.com/gpu"
        in (result.violations[0])
    )


# --- lifecycle ------------------------------------------------------------------------------


def events(*moves):
    """("draft",) then (before, after) pairs, as audit events in order."""
    out = [inv.RequestEvent(1, "request.draft", None, "draft")]
    for seq, (before, after) in enumerate(moves, start=2):
        out.append(inv.RequestEvent(seq, f"request.{after}", before, after))
    return out


APPLIED_PATH = [
    ("draft", "submitted"),
    ("submitted", "approved"),
    ("approved", "applying"),
    ("applying", "applied"),
]


def test_lifecycle_holds_on_an_allowed_path():
    result = inv.check_lifecycle({7: events(*APPLIED_PATH)}, {7: "applied"}, TABLE)
    assert result.ok, result.violations


def test_a_request_approved_twice_is_caught():
    path = [*APPLIED_PATH[:2], ("approved", "approved")]
    result = inv.check_lifecycle({7: events(*path)}, {7: "approved"}, TABLE)
    assert "request #7: approved 2 times" in result.violations
    assert "request #7: event 4 approved → approved is not an allowed transition" in (
        result.violations
    )


def test_a_move_from_a_state_the_request_was_not_in_is_caught():
    path = [("draft", "submitted"), ("submitted", "rejected"), ("submitted", "approved")]
    result = inv.check_lifecycle({7: events(*path)}, {7: "approved"}, TABLE)
    assert result.violations == ["request #7: event 4 moves it from submitted but it was rejected"]


def test_a_status_its_events_do_not_end_at_is_caught():
    result = inv.check_lifecycle({7: events(*APPLIED_PATH)}, {7: "applying"}, TABLE)
    assert result.violations == ["request #7: status applying but its audit events end at applied"]


# --- no request lost or made twice -----------------------------------------------------------


def lost(creates, markers, seen=None, db=None):
    db = db if db is not None else {i: "submitted" for ids in markers.values() for i in ids}
    return inv.check_no_request_lost(creates, markers, seen or {}, db, TABLE)


def test_every_create_made_what_its_client_was_told():
    creates = [
        inv.CreateRecord("op-1", 201, 10),
        inv.CreateRecord("op-2", 400, None),
        inv.CreateRecord("op-3", 0, None),  # never answered: may or may not have made one
    ]
    assert lost(creates, {"op-1": [10], "op-3": [11]}).ok


def test_a_retried_create_that_made_two_requests_is_caught():
    result = lost([inv.CreateRecord("op-1", 201, 12)], {"op-1": [11, 12]})
    assert result.violations == [
        "op-1: the client got request #12, the database has #11, #12 for it"
    ]


def test_a_request_the_client_got_but_the_database_lost_is_caught():
    result = lost([inv.CreateRecord("op-1", 201, 12)], {}, db={})
    assert result.violations == ["op-1: the client got request #12, missing from the database"]


def test_a_refused_create_that_made_a_request_is_caught_unless_its_key_was_busy():
    assert lost([inv.CreateRecord("op-1", 409, None)], {"op-1": [5]}).violations == [
        "op-1: refused with 409, yet made request #5"
    ]
    busy = inv.CreateRecord("op-1", 409, None, "idempotency_in_progress")
    assert lost([busy], {"op-1": [5]}).violations == [
        "op-1: its key was still 'in progress' after every retry (made #5)"
    ]


def test_a_request_nobody_asked_for_is_caught():
    assert lost([], {"op-9": [4]}).violations == ["#4 carry op-9, which no client sent"]


def test_a_status_a_client_was_told_must_not_be_undone():
    told = {4: "applied", 5: "submitted"}
    ok = lost([], {}, seen=told, db={4: "applied", 5: "applied"})
    assert ok.ok, ok.violations
    result = lost([], {}, seen=told, db={4: "submitted", 5: "submitted"})
    assert result.violations == [
        "request #4: a client saw it applied, now it is submitted (not reachable from what "
        "the client was told)"
    ]


# --- the cluster holds what the database says ------------------------------------------------

QUOTA = {
    "apiVersion": "v1",
    "kind": "ResourceQuota",
    "metadata": {"name": "gpu-quota", "namespace": "a", "labels": {"managed": "yes"}},
    "spec": {"hard": {"requests.nvidia.com/gpu": "10"}},
}
KEY = ("v1", "ResourceQuota", "a", "gpu-quota")


def live(obj, **spec):
    """As the API server answers: its own metadata and status around what was applied."""
    meta = {**obj["metadata"], "resourceVersion": "7", "uid": "u-1"}
    return {**obj, "metadata": meta, "status": {"used": {}}, "spec": spec or obj["spec"]}


def test_cluster_state_equal_to_the_database():
    assert inv.check_cluster_state("c", [QUOTA], {KEY: live(QUOTA)}).ok


def test_a_cluster_object_that_differs_is_caught():
    changed = live(QUOTA, hard={"requests.nvidia.com/gpu": "8"})
    result = inv.check_cluster_state("c", [QUOTA], {KEY: changed})
    assert result.violations == [
        "c: ResourceQuota a/gpu-quota differs (live ≠ desired): "
        "spec.hard.requests.nvidia.com/gpu: '8' ≠ '10'"
    ]


def test_missing_and_left_over_objects_are_caught_but_namespaces_may_stay():
    namespace_key = ("v1", "Namespace", "", "old-team")
    left = {("v1", "ResourceQuota", "b", "gpu-quota"): {}, namespace_key: {}}
    result = inv.check_cluster_state("c", [QUOTA], left)
    assert result.violations == [
        "c: ResourceQuota a/gpu-quota is missing",
        "c: ResourceQuota b/gpu-quota is left over",
    ]


# --- no 5xx outside the fault windows -----------------------------------------------------------


def answer(started, ended, status=500):
    return SimpleNamespace(
        started=started,
        ended=ended,
        status=status,
        method="POST",
        path="requests/",
        user="lead-01",
        attempt=1,
    )


def test_a_5xx_in_a_fault_window_is_excused_one_outside_is_not():
    windows = [(10.0, 15.0, "redis_restart"), (30.0, 30.1, "db_drop")]
    exchanges = [
        answer(9.0, 11.0),  # overlaps the Redis restart
        answer(29.5, 30.05),  # in flight when the database connections were cut
        answer(30.2, 30.4),  # started after the cut: its connection must have been renewed
        answer(40.0, 41.0, 200),
    ]
    result, excused = inv.check_no_5xx(exchanges, windows)
    assert excused == {"redis_restart": 1, "db_drop": 1}
    assert result.violations == ["500 at 30.2-30.4 s: POST requests/ by lead-01 (attempt 1)"]


# --- converged -------------------------------------------------------------------------------


def test_work_still_owed_after_the_run_is_caught():
    requests = [
        request(1, "applying"),
        request(2, "failed", grant_start_failed=True),  # final by design
        request(3, "approved", starts_later=True),  # a grant waiting for its start
        request(4, "approved"),
    ]
    result = inv.check_converged(["c #3 pending"], ["c run #9"], requests)
    assert result.violations == [
        "sync not done: c #3 pending",
        "sync run still running: c run #9",
        "request #1 is still applying",
        "request #4 is approved but not applied",
    ]
