"""A maximum run time on the real control plane: the portal's admission policy holds Jobs,
pods and Kueue Workloads of a limited priority class to a deadline within the namespace's
maximum, and what ends them then is Kubernetes itself (the job controller) or Kueue: the run
is over and its GPUs count no more against the quota."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from quotas.models import Cluster, PriorityClass, RunTimeLimit, TeamNamespace
from quotas.services import priority_class_save, run_time_limit_delete, run_time_limit_set
from tests.support.real import POD_REQUESTS, WORKLOADS, is_true, synced
from tests.support.waiting import poll

pytestmark = pytest.mark.django_db

NS = "team-a-training"  # the demo allows training and experiment there


def create(cp, obj: dict, *, dry_run: bool = False):
    args = ["create", "-o", "json", "-f", "-"]
    if dry_run:
        args.append("--dry-run=server")
    return cp.kubectl(*args, input=json.dumps(obj), check=False)


def refused(cp, obj: dict) -> str:
    proc = create(cp, obj)
    assert proc.returncode != 0, f"{obj['kind']} {obj['metadata']['name']} was admitted"
    return proc.stderr


def admitted(cp, obj: dict) -> dict:
    proc = create(cp, obj)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def pod_spec(priority: str, gpus: int, deadline: int | None = None) -> dict:
    spec: dict = {
        "schedulerName": "default-scheduler",
        "priorityClassName": priority,
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "train",
                "image": "registry.invalid/train:1",
                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
            }
        ],
    }
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    return spec


def job(
    name: str, priority: str, *, deadline: int | None, gpus: int = 1, namespace: str = NS, **spec
) -> dict:
    body: dict = {"backoffLimit": 0, "template": {"spec": pod_spec(priority, gpus)}, **spec}
    if deadline is not None:
        body["activeDeadlineSeconds"] = deadline
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": body,
    }


def pod(name: str, priority: str, *, deadline: int | None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": pod_spec(priority, 0, deadline),
    }


def gpus_used(cp, namespace: str = NS) -> str:
    quota = cp.get_json("resourcequota", "gpu-quota", namespace) or {}
    return quota.get("status", {}).get("used", {}).get("requests.nvidia.com/gpu", "")


def job_failed_by_deadline(cp, name: str, namespace: str = NS) -> bool:
    status = (cp.get_json("job", name, namespace) or {}).get("status", {})
    return any(
        c["type"] == "Failed" and c["status"] == "True" and c.get("reason") == "DeadlineExceeded"
        for c in status.get("conditions", ())
    )


@pytest.fixture
def demo(real_cluster, on_real_cluster):
    call_command("seed_demo")
    return on_real_cluster(Cluster.objects.get(name="demo"))


def test_jobs_and_pods_of_a_limited_class_must_state_a_deadline_and_end_by_it(real_cluster, demo):
    cp = real_cluster
    admin = User.objects.get(username="admin")  # the demo's platform admin
    namespace = TeamNamespace.objects.get(cluster=demo, name=NS)
    experiment = PriorityClass.objects.get(name="experiment")
    run_time_limit_set(
        team_namespace=namespace, priority_class=experiment, max_seconds=20, acting_user=admin
    )
    synced(demo)
    ns = cp.get_json("namespace", NS)
    assert ns["metadata"]["annotations"]["quota-portal/max-run-time.experiment"] == "20"
    poll(
        "the maximum run time policy to be enforced",
        lambda: create(cp, job("probe", "experiment", deadline=None), dry_run=True).returncode,
    )

    message = refused(cp, job("unbounded", "experiment", deadline=None))
    assert "quota-portal-max-run-time" in message, message
    assert (
        "Job unbounded of priority class experiment in namespace team-a-training must state"
        " spec.activeDeadlineSeconds of at most 20" in message
    ), message
    assert "it states none" in message, message
    assert "it states 60" in refused(cp, job("too-long", "experiment", deadline=60))
    assert "Pod bare of priority class experiment" in refused(
        cp, pod("bare", "experiment", deadline=None)
    )
    admitted(cp, pod("bare", "experiment", deadline=20))
    # Another class of the namespace has no maximum: its Jobs need no deadline.
    admitted(cp, job("training", "training", deadline=None, suspend=True))

    # A deadline within the maximum: the Job runs on two GPUs, then the job controller ends it
    # and the quota counts its GPUs no more.
    admitted(cp, job("short", "experiment", deadline=8, gpus=2))
    poll("the short job's GPUs to count", lambda: gpus_used(cp) == "2", 60, 0.3)
    poll("the job controller to end the job", lambda: job_failed_by_deadline(cp, "short"), 60)
    poll("its GPUs to be free again", lambda: gpus_used(cp) == "0", 60, 0.3)

    # The deadline is mutable: raising it above the maximum is refused, other changes pass.
    admitted(cp, job("held", "experiment", deadline=10, suspend=True))
    raise_it = cp.kubectl(
        "patch", "job", "held", "-n", NS, "--type=merge",
        "-p", '{"spec":{"activeDeadlineSeconds":100}}', check=False,
    )  # fmt: skip
    assert raise_it.returncode != 0 and "it states 100" in raise_it.stderr, raise_it.stderr
    cp.kubectl("label", "job", "held", "-n", NS, "touched=yes")

    # Lowered below what a Job already states: that Job's own updates still pass.
    run_time_limit_set(
        team_namespace=namespace, priority_class=experiment, max_seconds=5, acting_user=admin
    )
    synced(demo)
    poll(
        "the lower maximum to be enforced",
        lambda: create(cp, job("probe", "experiment", deadline=8), dry_run=True).returncode,
    )
    cp.kubectl("label", "job", "held", "-n", NS, "touched=again", "--overwrite")

    # Removed: the annotation goes, the policy with the last maximum of the cluster, and Jobs
    # of the class need no deadline again.
    for limit in RunTimeLimit.objects.filter(team_namespace__cluster=demo):
        run_time_limit_delete(limit=limit, acting_user=admin)
    synced(demo)
    annotations = cp.get_json("namespace", NS)["metadata"].get("annotations", {})
    assert "quota-portal/max-run-time.experiment" not in annotations
    assert cp.get_json("validatingadmissionpolicy", "quota-portal-max-run-time") is None
    poll(
        "the policy to be gone",
        lambda: create(cp, job("probe", "experiment", deadline=None), dry_run=True).returncode == 0,
    )


def test_kueue_workloads_are_held_to_the_maximum_and_kueue_ends_them(
    real_cluster, kueue_cluster, admin
):
    """A Workload made directly must state maximumExecutionTimeSeconds within the maximum,
    and Kueue deactivates it when that time has passed, releasing its quota. A Job Kueue
    queues is held by its own deadline (the Workload Kueue makes for it is not checked)."""
    cp = real_cluster
    experiment = priority_class_save(
        priority_class=PriorityClass(name="experiment", value=1000, preempts=False),
        acting_user=admin,
    )
    namespace = TeamNamespace.objects.get(cluster=kueue_cluster, name="team-a-training")
    run_time_limit_set(
        team_namespace=namespace, priority_class=experiment, max_seconds=30, acting_user=admin
    )
    synced(kueue_cluster)

    def workload(name: str, seconds: int | None) -> dict:
        spec: dict = {
            "queueName": "default",
            "priority": experiment.value,  # Kueue wants the value with the reference
            "priorityClassRef": {
                "group": "scheduling.k8s.io",
                "kind": "PriorityClass",
                "name": "experiment",
            },
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": pod_spec("experiment", 1) | {"containers": [
                        {"name": "train", "image": "registry.invalid/train:1",
                         "resources": {"requests": POD_REQUESTS}}
                    ]}},
                }
            ],
        }  # fmt: skip
        if seconds is not None:
            spec["maximumExecutionTimeSeconds"] = seconds
        return {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace.name},
            "spec": spec,
        }

    poll(
        "the maximum run time policy to be enforced",
        lambda: create(cp, workload("probe", None), dry_run=True).returncode,
    )
    message = refused(cp, workload("unbounded", None))
    assert "must state spec.maximumExecutionTimeSeconds of at most 30" in message, message
    assert "it states 90" in refused(cp, workload("too-long", 90))

    admitted(cp, workload("short", 6))

    def state() -> dict:
        w = cp.get_json(WORKLOADS, "short", namespace.name) or {}
        return {
            "admitted": is_true(w, "Admitted"),
            "active": w.get("spec", {}).get("active", True),
            # Why: Kueue names the passed time in the reason of the conditions it sets.
            "reasons": sorted(
                {
                    f"{c['type']}:{c.get('reason', '')}"
                    for c in w.get("status", {}).get("conditions", ())
                    if "MaximumExecutionTime" in c.get("reason", "") + c.get("message", "")
                }
            ),
        }

    poll("Kueue to admit the workload", lambda: state()["admitted"], 60)
    poll("Kueue to deactivate it after its time", lambda: state()["active"] is False, 60)
    assert "Evicted:DeactivatedDueToMaximumExecutionTimeExceeded" in state()["reasons"], state()

    def cq_gpus() -> Decimal:
        cq = cp.get_json("clusterqueue", namespace.name) or {}
        used = [
            r.get("total", "0")
            for f in cq.get("status", {}).get("flavorsUsage", ())
            for r in f.get("resources", ())
            if r.get("name") == "nvidia.com/gpu"
        ]
        return Decimal(used[0]) if used else Decimal(0)

    poll("the ClusterQueue's GPUs to be released", lambda: cq_gpus() == 0, 60)

    # A queued Job within the maximum: Kueue's own Workload for it is admitted unchecked, the
    # Job runs and the job controller ends it at its deadline.
    queued = job("queued", "experiment", deadline=6, namespace=namespace.name)
    queued["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "default"}
    queued["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": POD_REQUESTS,
        "limits": {"nvidia.com/gpu": "1"},
    }
    admitted(cp, queued)
    poll(
        "the queued job to end at its deadline",
        lambda: job_failed_by_deadline(cp, "queued", namespace.name),
        90,
    )
