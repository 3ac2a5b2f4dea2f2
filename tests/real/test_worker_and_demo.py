"""The whole path on the real control plane: a team lead asks for more quota over the REST API,
two platform admins approve it, a real Celery worker syncs it, and the API server then admits
the pod it refused before. And the GPU work `make run-real` submits behaves as its banner says
(controlplane/demo.py)."""

from __future__ import annotations

import json

import pytest
from celery.contrib.testing.worker import start_worker
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.test import APIClient

from controlplane import demo
from controlplane.launcher import RUNS_FOR_ANNOTATION
from portal.celery import app
from portal.tokens import api_token_create
from quotas.models import Cluster, SyncRun
from tests.support.real import sync_now
from tests.support.waiting import poll

TEAM_A = "team-a-training"
TEAM_C = "team-c-dev"


def api_as(username: str) -> APIClient:
    user = get_user_model().objects.get(username=username)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=user, name='real')[1]}")
    return client


def gpu_pod(name: str, gpus: int, namespace: str = TEAM_A, **metadata) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, **metadata},
        "spec": {
            # The classes the demo allows in team-a-training and in team-c-dev.
            "priorityClassName": "training" if namespace == TEAM_A else "experiment",
            # The demo's experiments in team-c-dev have a maximum run time of a day.
            **({} if namespace == TEAM_A else {"activeDeadlineSeconds": 3600}),
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ],
        },
    }


def create(cp, obj: dict):
    return cp.kubectl("create", "-f", "-", input=json.dumps(obj), check=False)


def quota_hard(cp, namespace: str = TEAM_A) -> str:
    quota = cp.get_json("resourcequota", "gpu-quota", namespace) or {}
    if quota.get("status", {}).get("hard") != quota.get("spec", {}).get("hard"):
        return ""  # admission enforces what the quota controller copied to status
    return quota["spec"]["hard"].get("requests.nvidia.com/gpu", "")


@pytest.mark.django_db(transaction=True)
def test_an_approved_request_reaches_the_real_cluster_through_a_real_worker(
    real_cluster, on_real_cluster
):
    call_command("seed_demo")
    cluster = on_real_cluster(Cluster.objects.get(name="demo"))
    assert sync_now(cluster).status == SyncRun.Status.SUCCEEDED
    poll("team-c's quota of 4 in force", lambda: quota_hard(real_cluster, TEAM_C) == "4")
    assert create(real_cluster, gpu_pod("four", 4, TEAM_C)).returncode == 0
    refused = create(real_cluster, gpu_pod("two", 2, TEAM_C))
    assert refused.returncode != 0 and "exceeded quota: gpu-quota" in refused.stderr

    app.loader.import_module("celery.contrib.testing.tasks")
    with start_worker(app, pool="solo", perform_ping_check=True, shutdown_timeout=30):
        answer = api_as("lead-c").post(
            "/api/v1/requests/",
            {
                "team": "team-c",
                "justification": "a larger evaluation sweep",
                "submit": True,
                "lines": [
                    {
                        "cluster": "demo",
                        "namespace": TEAM_C,
                        "resource": "nvidia.com/gpu",
                        "guarantee": "2",
                        "cap": "5",  # team C's 4 on demo-mig take 4/7 of its ceiling 6
                    }
                ],
            },
            format="json",
        )
        assert answer.status_code == 201, answer.content
        request_id = answer.json()["id"]

        def status() -> str:
            return api_as("viewer").get(f"/api/v1/requests/{request_id}/").json()["status"]

        # The demo cluster is a production one: its policy wants two admins.
        for admin in ("admin", "admin2"):
            if status() != "submitted":
                break
            approved = api_as(admin).post(
                f"/api/v1/requests/{request_id}/approve/", {}, format="json"
            )
            assert approved.status_code == 200, approved.content
        final = poll(
            "the request applied",
            lambda: (s := status()) not in ("submitted", "approved", "applying") and s,
            timeout=120,
        )
        assert final == "applied"

    run = SyncRun.objects.filter(cluster=cluster).order_by("-id").first()
    assert run.status == SyncRun.Status.SUCCEEDED and run.worker != "tests-real", run.worker
    poll("team-c's quota of 5 in force", lambda: quota_hard(real_cluster, TEAM_C) == "5")
    queue = real_cluster.get_json("queue.scheduling.volcano.sh", TEAM_C)
    assert queue["spec"]["capability"] == {"nvidia.com/gpu": "5"}
    admitted = create(real_cluster, gpu_pod("one", 1, TEAM_C))
    assert admitted.returncode == 0, admitted.stderr


@pytest.mark.django_db
def test_the_run_real_work_runs_queues_and_meets_the_quota(real_cluster, on_real_cluster):
    call_command("seed_demo")
    cluster = on_real_cluster(Cluster.objects.get(name="demo"))
    assert sync_now(cluster).status == SyncRun.Status.SUCCEEDED
    demo.wait_until_enforced(real_cluster)
    assert len(demo.submit(real_cluster)) == len(demo.workloads())
    assert demo.submit(real_cluster) == []  # a second run keeps what is there

    def phases(namespace: str, prefix: str) -> list[str]:
        pods = real_cluster.get_json("pods", namespace=namespace)["items"]
        return sorted(
            p["status"].get("phase", "") for p in pods if p["metadata"]["name"].startswith(prefix)
        )

    def events(namespace: str, fragment: str) -> bool:
        items = real_cluster.get_json("events", namespace=namespace)["items"]
        return any(fragment in e.get("message", "") for e in items)

    poll("pretrain's 6 pods running", lambda: phases(TEAM_A, "pretrain") == ["Running"] * 6)
    poll("3 serve pods running", lambda: phases("team-b-inference", "serve") == ["Running"] * 3)
    poll("the 4th serve pod refused", lambda: events("team-b-inference", "exceeded quota"))
    poll("an eval pod running", lambda: phases(TEAM_C, "eval") == ["Running"])
    poll("finetune held by team-a's queue", lambda: events(TEAM_A, "queue resource quota"))
    assert phases(TEAM_A, "finetune") == []


@pytest.mark.django_db
def test_a_pod_annotated_with_its_run_time_finishes_and_frees_its_gpus(
    real_cluster, on_real_cluster
):
    call_command("seed_demo")
    cluster = on_real_cluster(Cluster.objects.get(name="demo"))
    assert sync_now(cluster).status == SyncRun.Status.SUCCEEDED
    poll("team-a's quota of 10 in force", lambda: quota_hard(real_cluster) == "10")
    brief = gpu_pod("brief", 2, annotations={RUNS_FOR_ANNOTATION: "2s"})
    assert create(real_cluster, brief).returncode == 0
    assert create(real_cluster, gpu_pod("stays", 2)).returncode == 0

    def phase(name: str) -> str:
        return real_cluster.get_json("pod", name, TEAM_A)["status"].get("phase", "")

    poll("pod brief Succeeded", lambda: phase("brief") == "Succeeded")
    assert phase("stays") == "Running"

    def used() -> str:
        quota = real_cluster.get_json("resourcequota", "gpu-quota", TEAM_A)
        return quota["status"].get("used", {}).get("requests.nvidia.com/gpu")

    # A finished pod no longer counts against the quota.
    poll("used to fall to 2", lambda: used() == "2")
