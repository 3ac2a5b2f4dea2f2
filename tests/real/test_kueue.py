"""Kueue on the real control plane: what the portal renders makes a team's GPU guarantee a
floor. A team gets its guarantee, borrows what an idle team lends up to its cap and no
further, and the lending team takes its guarantee back by preemption when it needs it."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from quotas.models import SyncRun
from tests.support.real import (
    WORKLOADS,
    cluster_queue_active,
    is_true,
    submit_jobs,
    sync_now,
)

pytestmark = pytest.mark.django_db


def workloads(cp, namespace: str) -> list[dict]:
    return cp.get_json(WORKLOADS, namespace=namespace)["items"]


def admitted(cp, namespace: str) -> list[dict]:
    return [w for w in workloads(cp, namespace) if is_true(w, "Admitted")]


def running_pods(cp, namespace: str) -> list[dict]:
    pods = cp.get_json("pods", namespace=namespace)["items"]
    return [
        p
        for p in pods
        if p["status"].get("phase") == "Running"
        and p["spec"].get("nodeName", "").startswith("gpu-node-")
        and not p["metadata"].get("deletionTimestamp")
    ]


def pod_summary(cp, namespace: str) -> dict:
    """Pods by phase and node, and the job events (what a failed wait shows)."""
    pods = cp.get_json("pods", namespace=namespace)["items"]
    phases = Counter((p["status"].get("phase"), p["spec"].get("nodeName")) for p in pods)
    events = cp.kubectl("get", "events", "-n", namespace, "-o", "json").stdout
    reasons = Counter(
        (e["involvedObject"]["kind"], e["reason"], e["message"][:120])
        for e in json.loads(events)["items"]
    )
    taints = {n["metadata"]["name"]: n["spec"].get("taints") for n in cp.get_json("nodes")["items"]}
    return {"pods": dict(phases), "events": reasons.most_common(8), "taints": taints}


def wait_for(what: str, check, timeout: float = 60, settle: float = 0) -> float:
    """Poll ``check`` until it holds (then, with ``settle``, until it has held that long);
    the seconds it took. Fails with the last value it saw."""
    start = time.monotonic()
    held_since = None
    value = None
    while time.monotonic() - start < timeout:
        value = check()
        if value is True:
            held_since = held_since or time.monotonic()
            if time.monotonic() - held_since >= settle:
                return held_since - start
        else:
            held_since = None
        time.sleep(0.5)
    pytest.fail(f"{what}: not within {timeout:.0f} s (last seen: {value})")


def counts(cp, namespace: str) -> dict[str, int]:
    items = workloads(cp, namespace)
    return {
        "workloads": len(items),
        "admitted": sum(is_true(w, "Admitted") for w in items),
        "evicted": sum(is_true(w, "Evicted") for w in items),
        "preempted": sum(is_true(w, "Preempted") for w in items),
    }


def test_a_team_borrows_up_to_its_cap_and_the_lender_reclaims_its_guarantee(
    real_cluster, kueue_cluster
):
    cp = real_cluster
    run = sync_now(kueue_cluster)
    assert run.status == SyncRun.Status.SUCCEEDED, (run.error, run.backend_problems)
    for name in ("team-a-training", "team-b-training"):
        wait_for(f"ClusterQueue {name} active", lambda cq=name: cluster_queue_active(cp, cq))

    # (1) Team A gets its guarantee.
    submit_jobs(cp, "team-a-training", "a", 10)
    wait_for(
        "team A's 10 jobs admitted",
        lambda: len(admitted(cp, "team-a-training")) == 10 or counts(cp, "team-a-training"),
    )

    # (2) Team B is idle: A borrows its guarantee up to A's cap of 14, and no further.
    submit_jobs(cp, "team-a-training", "a-extra", 5)
    wait_for(
        "team A admitted up to its cap and no further",
        lambda: (
            counts(cp, "team-a-training")
            == {"workloads": 15, "admitted": 14, "evicted": 0, "preempted": 0}
            or counts(cp, "team-a-training")
        ),
        settle=5,
    )
    wait_for(
        "team A's 14 pods running",
        lambda: (
            len(running_pods(cp, "team-a-training")) == 14 or pod_summary(cp, "team-a-training")
        ),
    )

    # (3) B wants its guarantee: 2 GPUs are free, the other 4 must come back from A.
    start = time.monotonic()
    submit_jobs(cp, "team-b-training", "b", 6)
    admitted_after = wait_for(
        "team B's 6 jobs admitted (its guarantee reclaimed)",
        lambda: len(admitted(cp, "team-b-training")) == 6 or counts(cp, "team-b-training"),
    )
    wait_for(
        "team B's 6 pods running",
        lambda: len(running_pods(cp, "team-b-training")) == 6 or pod_summary(cp, "team-b-training"),
    )
    running_after = time.monotonic() - start
    a = counts(cp, "team-a-training")
    # A keeps exactly its guarantee: only the 4 GPUs it borrowed of B's were preempted.
    assert a["admitted"] == 10, a
    assert a["preempted"] == 4 and a["evicted"] == 4, a
    preempted = [w for w in workloads(cp, "team-a-training") if is_true(w, "Preempted")]
    reasons = {
        c["reason"]
        for w in preempted
        for c in w["status"]["conditions"]
        if c["type"] == "Preempted"
    }
    assert reasons == {"InCohortReclamation"}, reasons
    wait_for(
        "team A back to 10 running pods", lambda: len(running_pods(cp, "team-a-training")) == 10
    )
    print(
        f"\nKueue reclaim: B admitted 6/6 {admitted_after:.1f} s after submitting, pods running "
        f"after {running_after:.1f} s; A preempted {a['preempted']} ({reasons}), keeps "
        f"{a['admitted']}"
    )
