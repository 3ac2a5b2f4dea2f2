"""Why work waits, read off the real control plane: workloads made to wait for each reason
(a used-up namespace quota, a priority class the allocation does not allow, no node with
room, a Kueue queue at its cap, a cohort with nothing to lend, another team reclaiming its
guarantee, a Volcano queue at its capability), and the portal's reading of the cluster names
that reason, as the API and the dashboard's page show it."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client

from quotas.kube import waiting
from quotas.kube.client import client_for_cluster
from quotas.kube.live_waits import read_namespace_objects
from quotas.models import Cluster, ClusterCapacity, PriorityClass, Resource, Team, TeamNamespace
from quotas.services import allocation_set, priority_class_save
from tests.support.real import (
    POD_REQUESTS,
    cluster_queue_active,
    create_volcano,
    podgroup_of,
    submit_jobs,
    synced,
    synced_demo,
    volcano_job,
)
from tests.support.waiting import poll

pytestmark = pytest.mark.django_db

NS = "team-w-training"


def waits_now(cluster: Cluster, namespace: str) -> list[waiting.Wait]:
    client = client_for_cluster(cluster)
    try:
        return waiting.namespace_waits(read_namespace_objects(client, namespace, cluster.backends))
    finally:
        client.close()


def by_name(cluster: Cluster, namespace: str) -> dict[str, waiting.Wait]:
    return {w.name: w for w in waits_now(cluster, namespace)}


def gpu_job(name: str, *, gpus: int, pods: int = 1, priority: str = "training") -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "backoffLimit": 0,
            "template": {
                "spec": {
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
            },
        },
    }


@pytest.fixture
def core_cluster(admin, on_real_cluster):
    """The core backend only (ResourceQuota and policies, the default scheduler): team W may
    use 12 of the 16 A100s with the training class."""
    gpu = Resource.objects.create(
        name="nvidia.com/gpu", display_name="A100", kind=Resource.Kind.GPU, unit="GPU"
    )
    cluster = Cluster.objects.create(
        name="waits", kueue_enabled=False, volcano_enabled=False, max_cap_share=Decimal(1)
    )
    ClusterCapacity.objects.create(cluster=cluster, resource=gpu, capacity=Decimal(16))
    for name, value in (("training", 1000), ("experiment", 500)):
        priority_class_save(
            priority_class=PriorityClass(name=name, value=value, preempts=False),
            acting_user=admin,
        )
    team = Team.objects.create(slug="team-w", name="Team W")
    namespace = TeamNamespace.objects.create(
        team=team, cluster=cluster, name=NS, workload_class="training"
    )
    allocation_set(
        team_namespace=namespace,
        resource=gpu,
        guarantee=4,
        cap=12,
        priority_classes=["training"],
        acting_user=admin,
        reason="waits test",
    )
    return on_real_cluster(cluster)


def test_core_reasons_quota_used_up_class_not_allowed_and_no_node_fits(
    real_cluster, core_cluster, admin
):
    cp = real_cluster
    synced(core_cluster)
    cp.kubectl(
        "create", "-f", "-", input=json.dumps(gpu_job("wrong-class", gpus=1, priority="experiment"))
    )
    # 9 GPUs in one pod: the quota allows it (cap 12), no node has 9 (8 a node).
    cp.kubectl("create", "-f", "-", input=json.dumps(gpu_job("too-big", gpus=9)))

    def both_seen():
        found = by_name(core_cluster, NS)
        pods = [w for w in found.values() if w.kind == "Pod"]
        return ("wrong-class" in found and pods) and found

    found = poll("the class refusal and the unschedulable pod", both_seen, 60)
    wrong = found["wrong-class"]
    assert (wrong.kind, wrong.reason, wrong.resource) == (
        "Job",
        waiting.PRIORITY_CLASS_NOT_ALLOWED,
        "nvidia.com/gpu",
    ), wrong
    assert "gpu-quota-other-classes" in wrong.detail, wrong.detail
    (too_big,) = [w for w in found.values() if w.kind == "Pod"]
    assert too_big.name.startswith("too-big-") and too_big.reason == waiting.NO_NODE_FITS
    assert "nvidia.com/gpu" in too_big.detail, too_big.detail

    # 12 of 12 GPUs held by three running pods: the next Job's pod is refused by the quota,
    # and the wait names the pods that hold it.
    cp.kubectl("delete", "job", "too-big", "-n", NS, "--wait=true")
    cp.kubectl("create", "-f", "-", input=json.dumps(gpu_job("fill", gpus=4, pods=3)))

    def running() -> int:
        pods = cp.get_json("pods", namespace=NS)["items"]
        return sum(p["status"].get("phase") == "Running" for p in pods)

    poll("the three pods of fill running", lambda: running() == 3, 60)
    cp.kubectl("create", "-f", "-", input=json.dumps(gpu_job("one-more", gpus=1)))
    more = poll(
        "the quota refusal of one-more", lambda: by_name(core_cluster, NS).get("one-more"), 60
    )
    assert (more.kind, more.reason, more.resource) == (
        "Job",
        waiting.QUOTA_USED_UP,
        "nvidia.com/gpu",
    ), more
    assert "exceeded quota: gpu-quota," in more.detail
    assert len(more.holders) == 3 and {h.amount for h in more.holders} == {"4"}, more.holders
    assert all(h.pod.startswith("fill-") for h in more.holders)

    # The API and the page say the same to the team's lead; another team sees nothing.
    namespace = TeamNamespace.objects.get(cluster=core_cluster, name=NS)
    lead = User.objects.create_user("lead-w", password="x")
    namespace.team.memberships.create(user=lead, role="lead")
    client = Client()
    client.force_login(lead)
    answer = client.get(f"/api/v1/namespaces/{namespace.pk}/waiting/")
    assert answer.status_code == 200, answer.content
    reasons = {w["name"]: w["reason"] for w in answer.json()["waiting"]}
    assert reasons["one-more"] == waiting.QUOTA_USED_UP
    assert reasons["wrong-class"] == waiting.PRIORITY_CLASS_NOT_ALLOWED
    page = client.get(f"/waiting/{namespace.team.slug}/")
    assert page.status_code == 200
    assert b'data-testid="wait-one-more"' in page.content
    outsider = User.objects.create_user("outsider", password="x")
    client.force_login(outsider)
    assert client.get(f"/api/v1/namespaces/{namespace.pk}/waiting/").status_code == 404
    assert client.get(f"/waiting/{namespace.team.slug}/").status_code == 404


def test_kueue_reasons_queue_at_cap_nothing_to_lend_and_reclaim(real_cluster, kueue_cluster):
    """Team A 10/14, team B 6/10 on 16 GPUs (tests/real/conftest.py)."""
    cp = real_cluster
    synced(kueue_cluster)
    for name in ("team-a-training", "team-b-training"):
        poll(f"ClusterQueue {name} active", lambda cq=name: cluster_queue_active(cp, cq) is True)
    a = "team-a-training"

    # 15 one-GPU Jobs: 14 admitted (10 own, 4 of B's idle guarantee), the 15th waits at A's
    # cap; a Job of 15 pods can never fit the cap of 14.
    submit_jobs(cp, a, "a", 15)
    big = gpu_job("big", gpus=1, pods=15)
    big["metadata"]["namespace"] = a
    big["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "default"}
    del big["spec"]["template"]["spec"]["priorityClassName"]  # none on this cluster
    big["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": POD_REQUESTS,
        "limits": {"nvidia.com/gpu": "1", "memory": POD_REQUESTS["memory"]},
    }
    cp.kubectl("create", "-f", "-", input=json.dumps(big))

    def reasons() -> dict[str, str]:
        return {w.name: w.reason for w in waits_now(kueue_cluster, a) if w.kind == "Workload"}

    def at_cap():
        found = reasons()
        return sorted(found.values()) == [waiting.QUEUE_AT_CAP] * 2 and found

    found = poll("the 15th Job and the big one waiting at the cap", at_cap, 90)
    assert any(name.startswith("job-big-") for name in found), found
    big_wait = next(w for w in waits_now(kueue_cluster, a) if w.name.startswith("job-big-"))
    assert "maximum capacity" in big_wait.detail and big_wait.resource == "nvidia.com/gpu"

    # B takes its guarantee back: the 4 Workloads A ran on it are preempted by reclaim, and
    # the 15th, within A's cap now, finds nothing left to borrow.
    submit_jobs(cp, "team-b-training", "b", 6)

    def reclaimed():
        found = sorted(reasons().values())
        expected = sorted([waiting.QUEUE_AT_CAP, waiting.NOTHING_TO_LEND] + [waiting.RECLAIMED] * 4)
        return found == expected or None

    poll("4 reclaimed, 1 with nothing to borrow, the big one at the cap", reclaimed, 120)
    reclaim = next(w for w in waits_now(kueue_cluster, a) if w.reason == waiting.RECLAIMED)
    assert "reclamation within the cohort" in reclaim.detail, reclaim.detail
    assert reclaim.queue == a

    # B's last Workloads wait while the preemptions they asked for finish, then all run.
    def b_all_admitted() -> bool:
        return not [w for w in waits_now(kueue_cluster, "team-b-training") if w.kind == "Workload"]

    poll("B's six Workloads admitted", b_all_admitted, 60)


def test_volcano_reason_queue_at_capability(real_cluster, on_real_cluster):
    cp = real_cluster
    demo = synced_demo(cp, on_real_cluster)
    team_a = "team-a-training"
    create_volcano(cp, volcano_job("first", replicas=4, min_available=4))
    # 4 running + a gang of 7 is above the queue's capability of 10.
    poll("the PodGroup of job first", lambda: podgroup_of(cp, "first"))
    create_volcano(cp, volcano_job("second", replicas=7, min_available=7))
    group = poll("the PodGroup of job second", lambda: podgroup_of(cp, "second"))

    def held():
        found = {w.name: w for w in waits_now(demo, team_a)}
        wait = found.get(group["metadata"]["name"])
        return wait if wait and wait.reason == waiting.QUEUE_AT_CAP else None

    wait = poll("Volcano's queue refusal read as the queue at its cap", held, 90)
    assert (wait.kind, wait.queue, wait.resource) == ("PodGroup", team_a, "nvidia.com/gpu")
    assert "queue resource quota insufficient" in wait.detail
    # Its pods (if Volcano made any yet) are not listed a second time.
    assert not [w for w in waits_now(demo, team_a) if w.kind == "Pod"]
