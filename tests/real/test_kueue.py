"""Kueue on the real control plane: what the portal renders makes a team's GPU guarantee a
floor. A team gets its guarantee, borrows what an idle team lends up to its cap and no
further, and the lending team takes its guarantee back by preemption when it needs it."""

from __future__ import annotations

import json
import time
from collections import Counter
from decimal import Decimal

import pytest

from quotas.models import Cluster, ClusterCapacity, Resource, SyncRun, Team, TeamNamespace
from quotas.services import allocation_set
from tests.support.real import sync_now

pytestmark = pytest.mark.django_db

WORKLOADS = "workloads.kueue.x-k8s.io"
# A realistic training pod: one GPU with the cpu and memory that go with it.
POD_REQUESTS = {"nvidia.com/gpu": "1", "cpu": "4", "memory": "32Gi"}


@pytest.fixture
def kueue_cluster(admin, on_real_cluster):
    """16 A100s on Kueue: team A 10/14 and team B 6/10 (guarantee/cap) sum to the capacity,
    so A can only reach its cap by borrowing B's idle guarantee, which B then reclaims (with
    guarantees below the capacity, the unguaranteed GPUs in the root Cohort would serve B
    without any reclaim)."""
    gpu = Resource.objects.create(
        name="nvidia.com/gpu",
        display_name="A100 card",
        kind=Resource.Kind.GPU,
        unit="GPU",
        gpu_model="A100 80GB",
    )
    cluster = Cluster.objects.create(
        name="kueue-real",
        kueue_enabled=True,
        volcano_enabled=False,
        kueue_cpu_pool=Decimal(96),
        kueue_memory_pool_gib=Decimal(768),
        max_cap_share=Decimal(1),
    )
    ClusterCapacity.objects.create(cluster=cluster, resource=gpu, capacity=Decimal(16))
    for slug, guarantee, cap in (("team-a", 10, 14), ("team-b", 6, 10)):
        team = Team.objects.create(slug=slug, name=slug.title())
        namespace = TeamNamespace.objects.create(
            team=team, cluster=cluster, name=f"{slug}-training", workload_class="training"
        )
        allocation_set(
            team_namespace=namespace,
            resource=gpu,
            guarantee=guarantee,
            cap=cap,
            acting_user=admin,
            reason="kueue reclaim test",
        )
    return on_real_cluster(cluster)


def submit_jobs(cp, namespace: str, prefix: str, count: int) -> None:
    """``count`` one-pod Jobs in the namespace's LocalQueue ``default``."""
    jobs = [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": f"{prefix}-{i}",
                "namespace": namespace,
                "labels": {"kueue.x-k8s.io/queue-name": "default"},
            },
            "spec": {
                "parallelism": 1,
                "completions": 1,
                "backoffLimit": 0,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "train",
                                "image": "registry.invalid/train:1",
                                "resources": {
                                    "requests": POD_REQUESTS,
                                    "limits": {
                                        "nvidia.com/gpu": "1",
                                        "memory": POD_REQUESTS["memory"],
                                    },
                                },
                            }
                        ],
                    }
                },
            },
        }
        for i in range(count)
    ]
    cp.kubectl("apply", "-f", "-", input=_as_list(jobs))


def _as_list(items: list[dict]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


def _true(workload: dict, condition: str) -> bool:
    return any(
        c["type"] == condition and c["status"] == "True"
        for c in workload.get("status", {}).get("conditions", ())
    )


def workloads(cp, namespace: str) -> list[dict]:
    return cp.get_json(WORKLOADS, namespace=namespace)["items"]


def admitted(cp, namespace: str) -> list[dict]:
    return [w for w in workloads(cp, namespace) if _true(w, "Admitted")]


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
        "admitted": sum(_true(w, "Admitted") for w in items),
        "evicted": sum(_true(w, "Evicted") for w in items),
        "preempted": sum(_true(w, "Preempted") for w in items),
    }


def test_a_team_borrows_up_to_its_cap_and_the_lender_reclaims_its_guarantee(
    real_cluster, kueue_cluster
):
    cp = real_cluster
    run = sync_now(kueue_cluster)
    assert run.status == SyncRun.Status.SUCCEEDED, (run.error, run.backend_problems)
    for name in ("team-a-training", "team-b-training"):
        wait_for(f"ClusterQueue {name} active", lambda cq=name: _cq_active(cp, cq))

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
    preempted = [w for w in workloads(cp, "team-a-training") if _true(w, "Preempted")]
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


def _cq_active(cp, name: str) -> bool | dict:
    cq = cp.get_json("clusterqueues.kueue.x-k8s.io", name)
    return (cq is not None and _true(cq, "Active")) or (cq or {}).get("status", {})
