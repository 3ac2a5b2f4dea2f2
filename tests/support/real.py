"""Helpers of the tests on the real control plane (tests/real)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from django.core.management import call_command

from tests.support.waiting import poll

if TYPE_CHECKING:
    from quotas.models import Cluster

# The demo's namespaces the Volcano tests work in.
TEAM_A = "team-a-training"
TEAM_B = "team-b-inference"


def sync_now(cluster, trigger: str = "reconcile"):
    """One sync of ``cluster`` in this process (the portal's real sync code and client); the
    run, refreshed. A reconcile compares every object; "change" only what changed."""
    from quotas.kube.sync import cluster_sync

    run = cluster_sync(cluster_id=cluster.pk, trigger=trigger, worker="tests-real")
    run.refresh_from_db()
    return run


def synced(cluster: Cluster) -> None:
    run = sync_now(cluster)
    assert run.status == run.Status.SUCCEEDED, (run.error, run.backend_problems, run.counts)


def volcano_job(name: str, *, replicas: int, min_available: int, queue: str | None = None):
    spec = {
        "schedulerName": "volcano",
        "minAvailable": min_available,
        "tasks": [
            {
                "name": "worker",
                "replicas": replicas,
                "template": {
                    "spec": {
                        # team-a's allocation admits the training class only.
                        "priorityClassName": "training",
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "train",
                                "image": "busybox",
                                "resources": {
                                    "requests": {"nvidia.com/gpu": "1"},
                                    "limits": {"nvidia.com/gpu": "1"},
                                },
                            }
                        ],
                    }
                },
            }
        ],
    }
    if queue is not None:
        spec["queue"] = queue
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": TEAM_A},
        "spec": spec,
    }


def create_volcano(cp, obj: dict, check: bool = True):
    return cp.kubectl("create", "-f", "-", input=json.dumps(obj), check=check)


def podgroup_of(cp, job: str) -> dict | None:
    for pg in cp.get_json("podgroups.scheduling.volcano.sh", namespace=TEAM_A)["items"]:
        owners = pg["metadata"].get("ownerReferences") or []
        if any(o["kind"] == "Job" and o["name"] == job for o in owners):
            return pg
    return None


def wait_for_open_queues(cp, *names: str) -> None:
    """Volcano's job webhook takes jobs only into queues its controller has opened."""

    def open_():
        queues = cp.get_json("queues.scheduling.volcano.sh")["items"]
        state = {q["metadata"]["name"]: (q.get("status") or {}).get("state") for q in queues}
        return all(state.get(name) == "Open" for name in names)

    poll(f"queues {', '.join(names)} open", open_)


def synced_demo(cp, on_real_cluster) -> Cluster:
    from quotas.models import Cluster, SyncRun

    call_command("seed_demo")
    cluster = on_real_cluster(Cluster.objects.get(name="demo"))
    run = sync_now(cluster)
    assert run.status == SyncRun.Status.SUCCEEDED, (run.error, run.backend_problems)
    wait_for_open_queues(cp, "default", TEAM_A, TEAM_B)
    wait_for_queue_policies(cp)
    return cluster


def wait_for_queue_policies(cp) -> None:
    """The API server loads admission policies a moment after they are written: waits until
    a server-side dry run shows both in force (a Job naming no queue comes back with the
    team's; one naming another team's queue is refused)."""

    def dry_run(obj: dict):
        args = ("create", "--dry-run=server", "-o", "json", "-f", "-")
        return cp.kubectl(*args, input=json.dumps(obj), check=False)

    def mutated():
        proc = dry_run(volcano_job("probe", replicas=1, min_available=1))
        return proc.returncode == 0 and json.loads(proc.stdout)["spec"].get("queue") == TEAM_A

    def refused():
        return dry_run(volcano_job("probe", replicas=1, min_available=1, queue=TEAM_B)).returncode

    poll("the queue MutatingAdmissionPolicy in force", mutated)
    poll("the queue ValidatingAdmissionPolicy in force", refused)


WORKLOADS = "workloads.kueue.x-k8s.io"


# A realistic training pod: one GPU with the cpu and memory that go with it.
POD_REQUESTS = {"nvidia.com/gpu": "1", "cpu": "4", "memory": "32Gi"}


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
    cp.kubectl("apply", "-f", "-", input=as_list(jobs))


def as_list(items: list[dict]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


def is_true(workload: dict, condition: str) -> bool:
    return any(
        c["type"] == condition and c["status"] == "True"
        for c in workload.get("status", {}).get("conditions", ())
    )


def cluster_queue_active(cp, name: str) -> bool | dict:
    cq = cp.get_json("clusterqueues.kueue.x-k8s.io", name)
    return (cq is not None and is_true(cq, "Active")) or (cq or {}).get("status", {})
