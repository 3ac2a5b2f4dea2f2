"""GPU work for `make run-real`: what a newcomer watches with ``kubectl get pods -A`` once the
portal has pushed the demo's approved quota to the real control plane.

On the demo cluster (16 A100 on two fake nodes; team-a 6/10 in Volcano queue team-a-training,
team-b 4/6, team-c 2/4):

- team-a's ``pretrain`` (a gang of 6 GPUs) runs for four minutes; ``finetune`` (a gang of 6)
  waits in team-a's queue, whose capability of 10 it would pass, though the cluster has GPUs
  free (its PodGroup's events say ``queue resource quota insufficient``), and runs once
  ``pretrain`` has finished;
- team-b's ``serve`` Deployment asks for 4 replicas of 2 GPUs: three run, the fourth is
  refused by the ResourceQuota (the ReplicaSet's events say ``exceeded quota``);
- team-c's ``eval`` Job runs 4 one-GPU pods one after the other (class ``experiment``,
  whose maximum run time in team-c-dev the Job's deadline of an hour keeps).

13 of the 16 GPUs are busy then.

Pods finish by the launcher's ``RUNS_FOR_ANNOTATION`` stage (kwok runs no containers)."""

from __future__ import annotations

import json
import time

from controlplane.launcher import RUNS_FOR_ANNOTATION, ControlPlane, ControlPlaneError

NAMESPACES = ("team-a-training", "team-b-inference", "team-c-dev")
VOLCANO_QUEUES = ("team-a-training", "team-b-inference", "team-c-dev")


def _gpu_pod_spec(priority: str, gpus: int, *, runs_for: str | None, restart: str) -> dict:
    template: dict = {
        "metadata": {"annotations": {RUNS_FOR_ANNOTATION: runs_for}} if runs_for else {},
        "spec": {
            "priorityClassName": priority,
            "restartPolicy": restart,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/gpu-job:demo",
                    # Requests stated, not only limits: Volcano sizes a job's PodGroup
                    # (minResources, what its queue's capability is checked against at
                    # enqueue) from the template's requests alone.
                    "resources": {
                        "requests": {"nvidia.com/gpu": str(gpus)},
                        "limits": {"nvidia.com/gpu": str(gpus)},
                    },
                }
            ],
        },
    }
    return template


def _volcano_job(name: str, replicas: int, runs_for: str) -> dict:
    template = _gpu_pod_spec("training", 1, runs_for=runs_for, restart="Never")
    template["spec"]["schedulerName"] = "volcano"
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a-training"},
        "spec": {
            "schedulerName": "volcano",
            "queue": "team-a-training",
            "minAvailable": replicas,
            "tasks": [{"name": "worker", "replicas": replicas, "template": template}],
        },
    }


def workloads() -> list[dict]:
    """The demo's work, in the order it is submitted (``pretrain`` first, running before the
    rest comes: jobs created in the same scheduling cycle are taken in no fixed order)."""
    serve_labels = {"app": "serve"}
    serve_template = _gpu_pod_spec("production-inference", 2, runs_for=None, restart="Always")
    serve_template["metadata"]["labels"] = serve_labels
    eval_template = _gpu_pod_spec("experiment", 1, runs_for="90s", restart="Never")
    return [
        _volcano_job("pretrain", 6, "4m"),
        _volcano_job("finetune", 6, "3m"),
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "serve", "namespace": "team-b-inference"},
            "spec": {
                "replicas": 4,
                "selector": {"matchLabels": serve_labels},
                "template": serve_template,
            },
        },
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "eval", "namespace": "team-c-dev"},
            # The demo's experiments in team-c-dev have a maximum run time of a day
            # (quota-portal-max-run-time): the Job states its deadline, 4 runs of 90 s well
            # within it.
            "spec": {
                "parallelism": 1,
                "completions": 4,
                "activeDeadlineSeconds": 3600,
                "template": eval_template,
            },
        },
    ]


def _quotas_enforced(cp: ControlPlane) -> bool:
    """Admission enforces a ResourceQuota only once the quota controller filled its status."""
    for namespace in NAMESPACES:
        quotas = (cp.get_json("resourcequotas", namespace=namespace) or {}).get("items", [])
        if not quotas or any(q.get("status", {}).get("hard") != q["spec"]["hard"] for q in quotas):
            return False
    return True


def _queues_open(cp: ControlPlane) -> bool:
    queues = (cp.get_json("queues.scheduling.volcano.sh") or {}).get("items", [])
    state = {q["metadata"]["name"]: (q.get("status") or {}).get("state") for q in queues}
    return all(state.get(name) == "Open" for name in VOLCANO_QUEUES)


def wait_until_enforced(cp: ControlPlane, timeout: float = 120, stop=lambda: False) -> bool:
    """Until the demo's quotas are enforced and its Volcano queues take jobs (True), or
    ``stop()`` says to give up (False)."""
    deadline = time.monotonic() + timeout
    while not (_quotas_enforced(cp) and _queues_open(cp)):
        if stop():
            return False
        if time.monotonic() > deadline:
            raise ControlPlaneError(
                f"the demo's quotas and Volcano queues were not in force after {timeout:.0f} s"
            )
        time.sleep(1)
    return True


def _running(cp: ControlPlane, namespace: str, selector: str) -> int:
    pods = cp.kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json").stdout
    return sum(p["status"].get("phase") == "Running" for p in json.loads(pods)["items"])


def submit(cp: ControlPlane, timeout: float = 120, stop=lambda: False) -> list[str]:
    """Creates the demo's work (kept if already there), the first job running before the
    rest is created; what it created, as kind/namespace/name."""
    created = []
    for index, obj in enumerate(workloads()):
        meta = obj["metadata"]
        name = f"{obj['kind']}/{meta['namespace']}/{meta['name']}"
        proc = cp.kubectl("create", "-f", "-", input=json.dumps(obj), check=False)
        if proc.returncode == 0:
            created.append(name)
        elif "AlreadyExists" not in proc.stderr:
            raise ControlPlaneError(f"{name}: {proc.stderr.strip()}")
        if index == 0:
            replicas = obj["spec"]["minAvailable"]
            selector = f"volcano.sh/job-name={meta['name']}"
            deadline = time.monotonic() + timeout
            while _running(cp, meta["namespace"], selector) < replicas:
                if stop():
                    return created
                if time.monotonic() > deadline:
                    raise ControlPlaneError(f"{name} was not running after {timeout:.0f} s")
                time.sleep(1)
    return created
