"""The sorting of what waits into its reasons (quotas.kube.waiting), on objects shaped as the
API server, Kueue and Volcano write them (the messages are theirs, as tests/real sees them)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from quotas.kube import waiting
from quotas.kube.waiting import NamespaceObjects, namespace_waits

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
RECENT = (NOW - timedelta(minutes=2)).isoformat().replace("+00:00", "Z")
OLD = (NOW - timedelta(hours=3)).isoformat().replace("+00:00", "Z")


def job(name: str, *, active: int = 0, parallelism: int = 1, **status) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {"parallelism": parallelism, "completions": parallelism},
        "status": {"active": active, **status},
    }


def failed_create(name: str, message: str, *, when: str = RECENT, kind: str = "Job") -> dict:
    return {
        "type": "Warning",
        "reason": "FailedCreate",
        "involvedObject": {"kind": kind, "name": name},
        "message": message,
        "firstTimestamp": when,
        "lastTimestamp": when,
    }


def exceeded(quota: str, used: int, limited: int) -> str:
    return (
        f'Error creating: pods "x-1" is forbidden: exceeded quota: {quota}, requested:'
        f" requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu={used}, limited:"
        f" requests.nvidia.com/gpu={limited}"
    )


def running_pod(name: str, gpus: int) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
        "status": {"phase": "Running"},
    }


def pending_pod(name: str, *, reason: str = "Unschedulable", message: str = "", **meta) -> dict:
    return {
        "metadata": {"name": name, **meta},
        "spec": {"containers": [{}]},
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
            ],
        },
    }


def test_a_used_up_quota_names_the_pods_that_hold_it_largest_first():
    objects = NamespaceObjects(
        jobs=[job("more")],
        events=[failed_create("more", exceeded("gpu-quota", 12, 12))],
        pods=[running_pod("small", 1), running_pod("big", 8), running_pod("cpu-only", 0)],
    )
    (wait,) = namespace_waits(objects, now=NOW)
    assert (wait.kind, wait.name, wait.reason, wait.resource) == (
        "Job",
        "more",
        waiting.QUOTA_USED_UP,
        "nvidia.com/gpu",
    )
    assert [(h.pod, h.amount) for h in wait.holders] == [("big", "8"), ("small", "1")]
    assert wait.since == RECENT.replace("Z", "+00:00")


def test_the_other_classes_quota_means_the_priority_class_is_not_allowed():
    objects = NamespaceObjects(
        jobs=[job("wrong")],
        events=[failed_create("wrong", exceeded("gpu-quota-other-classes", 0, 0))],
    )
    (wait,) = namespace_waits(objects, now=NOW)
    assert wait.reason == waiting.PRIORITY_CLASS_NOT_ALLOWED and not wait.holders


def test_a_class_the_allocation_refuses_is_named_even_when_the_caps_are_used_up_too():
    """The quota admission names the first quota a pod exceeds (gpu-quota sorts first)."""
    refused = job("wrong")
    refused["spec"]["template"] = {"spec": {"priorityClassName": "experiment"}}
    allowed = job("right")
    allowed["spec"]["template"] = {"spec": {"priorityClassName": "training"}}
    other_classes = {
        "metadata": {"name": "gpu-quota-other-classes"},
        "spec": {
            "hard": {"requests.nvidia.com/gpu": "0"},
            "scopeSelector": {
                "matchExpressions": [
                    {"scopeName": "PriorityClass", "operator": "NotIn", "values": ["training"]}
                ]
            },
        },
    }
    objects = NamespaceObjects(
        jobs=[refused, allowed],
        events=[
            failed_create("wrong", exceeded("gpu-quota", 12, 12)),
            failed_create("right", exceeded("gpu-quota", 12, 12)),
        ],
        resource_quotas=[other_classes],
    )
    found = {w.name: w.reason for w in namespace_waits(objects, now=NOW)}
    assert found == {"wrong": waiting.PRIORITY_CLASS_NOT_ALLOWED, "right": waiting.QUOTA_USED_UP}


@pytest.mark.parametrize(
    ("controller", "event"),
    [
        pytest.param(job("done", Complete=True), RECENT, id="job-gone-on"),
        pytest.param(job("done", active=1), RECENT, id="job-has-its-pod-now"),
        pytest.param(job("done"), OLD, id="event-too-old"),
    ],
)
def test_a_refusal_that_no_longer_holds_anything_back_is_not_listed(controller, event):
    if controller["status"].pop("Complete", None):
        controller["status"]["conditions"] = [{"type": "Complete", "status": "True"}]
    objects = NamespaceObjects(
        jobs=[controller], events=[failed_create("done", exceeded("gpu-quota", 4, 4), when=event)]
    )
    assert namespace_waits(objects, now=NOW) == []


def test_an_event_of_a_controller_that_is_gone_is_not_listed():
    objects = NamespaceObjects(events=[failed_create("deleted", exceeded("gpu-quota", 4, 4))])
    assert namespace_waits(objects, now=NOW) == []


def test_a_policy_refusal_and_an_unknown_one():
    policy = (
        'Error creating: pods "r-1" is forbidden: ValidatingAdmissionPolicy'
        " 'quota-portal-max-run-time' with binding 'quota-portal-max-run-time' denied request:"
        " Pod r-1 of priority class experiment ..."
    )
    objects = NamespaceObjects(
        replica_sets=[
            {"metadata": {"name": "r"}, "spec": {"replicas": 2}, "status": {"replicas": 0}}
        ],
        jobs=[job("odd")],
        events=[
            failed_create("r", policy, kind="ReplicaSet"),
            failed_create("odd", "Error creating: something else"),
        ],
    )
    found = {w.name: w.reason for w in namespace_waits(objects, now=NOW)}
    assert found == {"r": waiting.REFUSED_BY_POLICY, "odd": waiting.OTHER}


def test_pods_no_node_takes_and_pods_explained_elsewhere():
    objects = NamespaceObjects(
        pods=[
            pending_pod("huge", message="0/3 nodes are available: 3 Insufficient nvidia.com/gpu."),
            pending_pod("gated", reason="SchedulingGated", message="")
            | {"spec": {"schedulingGates": [{"name": waiting.KUEUE_GATE}]}},
            pending_pod(
                "member", annotations={waiting.VOLCANO_GROUP_ANNOTATION: "pg-1"}, message="x"
            ),
            {
                "metadata": {"name": "starting"},
                "status": {
                    "phase": "Pending",
                    "conditions": [{"type": "PodScheduled", "status": "True"}],
                },
            },
        ],
        pod_groups=[
            {
                "metadata": {"name": "pg-1"},
                "spec": {"queue": "team-a"},
                "status": {"phase": "Pending"},
            }
        ],
        events=[
            {
                "type": "Normal",
                "reason": "Unschedulable",
                "involvedObject": {"kind": "PodGroup", "name": "pg-1"},
                "message": "queue resource quota insufficient: insufficient nvidia.com/gpu",
                "lastTimestamp": RECENT,
            }
        ],
    )
    found = {w.name: w for w in namespace_waits(objects, now=NOW)}
    assert set(found) == {"huge", "pg-1"}
    assert found["huge"].reason == waiting.NO_NODE_FITS
    group = found["pg-1"]
    assert (group.reason, group.resource, group.queue) == (
        waiting.QUEUE_AT_CAP,
        "nvidia.com/gpu",
        "team-a",
    )


def cluster_queue(nominal: str, borrowing: str | None, used: str) -> dict:
    quota = {"name": "nvidia.com/gpu", "nominalQuota": nominal}
    if borrowing is not None:
        quota["borrowingLimit"] = borrowing
    return {
        "spec": {"resourceGroups": [{"flavors": [{"name": "a100", "resources": [quota]}]}]},
        "status": {
            "flavorsUsage": [
                {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "total": used}]}
            ]
        },
    }


def workload(name: str, *conditions: dict, gpus: int = 1, count: int = 1) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {
            "queueName": "default",
            "podSets": [
                {
                    "count": count,
                    "template": {
                        "spec": {
                            "containers": [
                                {"resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}
                            ]
                        }
                    },
                }
            ],
        },
        "status": {"conditions": list(conditions)},
    }


def pending(message: str) -> dict:
    return {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": message}


UNUSED = (
    "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in"
    " flavor a100, 1 more needed"
)


@pytest.mark.parametrize(
    ("queue", "expected"),
    [
        pytest.param(cluster_queue("10", "4", "14"), waiting.QUEUE_AT_CAP, id="at-its-cap"),
        pytest.param(cluster_queue("10", "4", "10"), waiting.NOTHING_TO_LEND, id="below-its-cap"),
        pytest.param(
            cluster_queue("10", None, "14"), waiting.NOTHING_TO_LEND, id="no-borrowing-limit"
        ),
    ],
)
def test_kueue_waiting_for_quota_is_the_cap_or_a_cohort_with_nothing_to_lend(queue, expected):
    objects = NamespaceObjects(
        workloads=[workload("w", pending(UNUSED))],
        cluster_queues={"team-a": queue},
        local_queues={"default": "team-a"},
    )
    (wait,) = namespace_waits(objects, now=NOW)
    assert (wait.reason, wait.resource, wait.queue) == (expected, "nvidia.com/gpu", "team-a")


def test_kueue_reasons_beyond_the_quota_message():
    preempted = {
        "type": "Preempted",
        "status": "True",
        "reason": "InCohortReclamation",
        "message": "Preempted to accommodate a workload (UID: u) due to reclamation within the"
        " cohort",
    }
    by_priority = preempted | {"reason": "InClusterQueue"}
    never = pending(
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor"
        " a100, previously considered podsets requests (0) + current podset request (15) >"
        " maximum capacity (14)"
    )
    objects = NamespaceObjects(
        workloads=[
            workload("reclaimed", preempted, pending(UNUSED)),
            workload("outranked", by_priority, pending(UNUSED)),
            workload("never", never, count=15),
            workload("running", {"type": "QuotaReserved", "status": "True"}),
            workload("ended", {"type": "Finished", "status": "True"}),
            workload("new"),
        ],
        local_queues={"default": "team-a"},
    )
    found = {w.name: w.reason for w in namespace_waits(objects, now=NOW)}
    assert found == {
        "reclaimed": waiting.RECLAIMED,
        "outranked": waiting.PREEMPTED_BY_PRIORITY,
        "never": waiting.QUEUE_AT_CAP,
    }


def test_a_long_message_is_cut():
    objects = NamespaceObjects(pods=[pending_pod("p", message="x" * 2000)])
    (wait,) = namespace_waits(objects, now=NOW)
    assert len(wait.detail) == waiting.DETAIL_LENGTH and wait.detail.endswith("…")
