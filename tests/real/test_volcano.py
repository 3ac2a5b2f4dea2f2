"""Volcano on the real control plane (scheduler with the proportion plugin, job and podgroup
controllers, the queue/job webhooks of a default install): a team's work runs in the team's
queue whatever it names, and a department's guarantee counts once."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from quotas.models import Cluster, SyncRun, Team
from tests.support.real import (
    TEAM_A,
    TEAM_B,
    create_volcano,
    podgroup_of,
    sync_now,
    synced_demo,
    volcano_job,
    wait_for_open_queues,
)
from tests.support.waiting import poll

pytestmark = pytest.mark.django_db

REFUSED = "is not the Volcano queue of namespace"


def running(cp, job: str) -> int:
    pods = cp.kubectl(
        "get", "pods", "-n", TEAM_A, "-l", f"volcano.sh/job-name={job}", "-o", "json"
    ).stdout
    return sum(p["status"].get("phase") == "Running" for p in json.loads(pods)["items"])


def test_a_job_naming_no_queue_runs_in_the_team_queue_within_its_capability(
    real_cluster, on_real_cluster
):
    synced_demo(real_cluster, on_real_cluster)
    create_volcano(real_cluster, volcano_job("first", replicas=4, min_available=4))
    pg = poll("the PodGroup of job first", lambda: podgroup_of(real_cluster, "first"))
    assert pg["spec"]["queue"] == TEAM_A
    poll("4 running pods of job first", lambda: running(real_cluster, "first") == 4)

    # 4 running + a gang of 7 is above the queue's capability of 10 (the default queue has no
    # capability and 12 of the 16 GPUs free): Volcano keeps the gang out of the queue.
    create_volcano(real_cluster, volcano_job("second", replicas=7, min_available=7))
    pg = poll("the PodGroup of job second", lambda: podgroup_of(real_cluster, "second"))
    assert pg["spec"]["queue"] == TEAM_A

    def refused_by_queue():
        events = real_cluster.get_json("events", namespace=TEAM_A)["items"]
        return [
            e
            for e in events
            if e["involvedObject"]["kind"] == "PodGroup"
            and e["involvedObject"]["name"] == pg["metadata"]["name"]
            and "queue resource quota insufficient" in e.get("message", "")
        ]

    poll("Volcano to hold job second back by its queue", refused_by_queue)
    pg = podgroup_of(real_cluster, "second")
    assert pg["status"].get("phase") == "Pending", pg["status"]
    assert running(real_cluster, "second") == 0


def test_work_naming_another_queue_is_refused_and_the_default_queue_is_corrected(
    real_cluster, on_real_cluster
):
    synced_demo(real_cluster, on_real_cluster)
    # Another team's queue: refused by the portal's ValidatingAdmissionPolicy.
    elsewhere = json.dumps(volcano_job("elsewhere", replicas=1, min_available=1, queue=TEAM_B))
    refused = real_cluster.kubectl("create", "-f", "-", input=elsewhere, check=False)
    assert refused.returncode != 0
    assert REFUSED in refused.stderr and TEAM_B in refused.stderr, refused.stderr
    podgroup = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "borrowed", "namespace": TEAM_A},
        "spec": {"minMember": 1, "queue": TEAM_B},
    }
    refused = create_volcano(real_cluster, podgroup, False)
    assert refused.returncode != 0 and REFUSED in refused.stderr, refused.stderr

    # `default` (or nothing): set to the team's queue by the MutatingAdmissionPolicy.
    create_volcano(
        real_cluster, volcano_job("defaulted", replicas=1, min_available=1, queue="default")
    )
    job = real_cluster.get_json("jobs.batch.volcano.sh", "defaulted", TEAM_A)
    assert job["spec"]["queue"] == TEAM_A
    podgroup["metadata"]["name"] = "plain"
    podgroup["spec"]["queue"] = "default"
    create_volcano(real_cluster, podgroup)
    assert real_cluster.get_json("podgroup", "plain", TEAM_A)["spec"]["queue"] == TEAM_A

    # A bare pod for Volcano: its PodGroup (made by Volcano's podgroup controller from the
    # pod's queue annotation) lands in the team's queue.
    pod = volcano_job("x", replicas=1, min_available=1)["spec"]["tasks"][0]["template"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bare", "namespace": TEAM_A},
        "spec": {**pod["spec"], "schedulerName": "volcano"},
    }
    create_volcano(real_cluster, pod)

    def podgroup_of_bare():
        for pg in real_cluster.get_json("podgroups", namespace=TEAM_A)["items"]:
            owners = pg["metadata"].get("ownerReferences") or []
            if any(o["kind"] == "Pod" and o["name"] == "bare" for o in owners):
                return pg
        return None

    pg = poll("the PodGroup of pod bare", podgroup_of_bare)
    assert pg["spec"]["queue"] == TEAM_A
    poll(
        "pod bare running",
        lambda: real_cluster.get_json("pod", "bare", TEAM_A)["status"].get("phase") == "Running",
    )


def test_a_department_counts_its_members_guarantee_once(real_cluster, on_real_cluster):
    call_command("seed_demo")
    research = Team.objects.create(slug="research", name="Research")
    ml = Team.objects.create(slug="ml", name="ML", parent=research)
    Team.objects.filter(slug="team-b").update(parent=ml)
    cluster = on_real_cluster(Cluster.objects.get(name="demo"))
    run = sync_now(cluster)
    # Accepted by Volcano's queue webhook, parents before children.
    assert run.status == SyncRun.Status.SUCCEEDED, (run.error, run.backend_problems)
    leaf = real_cluster.get_json("queue.scheduling.volcano.sh", TEAM_B)
    assert leaf["spec"]["parent"] == "ml"
    assert leaf["spec"]["guarantee"]["resource"] == {"nvidia.com/gpu": "4"}
    for dept in ("research", "ml"):
        spec = real_cluster.get_json("queue.scheduling.volcano.sh", dept)["spec"]
        assert spec["capability"] == {"nvidia.com/gpu": "6"}, spec
    wait_for_open_queues(real_cluster, "research", "ml", TEAM_A, TEAM_B)

    # 16 GPUs, 4 guaranteed to team-b: team-a may use its whole cap of 10.
    create_volcano(real_cluster, volcano_job("big", replicas=10, min_available=1, queue=TEAM_A))
    poll("10 running pods of job big", lambda: running(real_cluster, "big") == 10, timeout=90)
