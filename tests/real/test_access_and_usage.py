"""What the portal needs of a real cluster: the ClusterRole of deploy/kubernetes is sufficient
(the sync runs as a ServiceAccount bound to it) and minimal (every verb it grants is one the
sync or the usage collector uses, so removing any one makes them fail); and the usage collector
reads real pods on the fake nodes, running and pending, with wait times."""

from __future__ import annotations

import copy
import time
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.utils import timezone

from quotas.kube.live_waits import waits_of_namespaces
from quotas.models import (
    Allocation,
    Cluster,
    PriorityClass,
    RunTimeLimit,
    SyncRun,
    TeamNamespace,
)
from quotas.services import (
    allocation_set,
    priority_class_delete,
    priority_class_delete_problems,
    priority_class_save,
    run_time_limit_delete,
)
from tests.support.real import sync_now
from tests.support.waiting import poll
from usage.cluster import usage_collect_cluster
from usage.models import UsageSample

pytestmark = pytest.mark.django_db

RBAC = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "rbac.yaml"
SA_NAMESPACE, SA_NAME = "gpu-quota-portal", "gpu-quota-portal"
SA_USER = f"system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}"


def gpu_pod(name: str, gpus: int, *, priority: str = "training", **spec) -> dict:
    resources = {"nvidia.com/gpu": str(gpus), "cpu": "1", "memory": "1Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "priorityClassName": priority,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/train:1",
                    "resources": {"requests": resources, "limits": resources},
                }
            ],
            **spec,
        },
    }


def rbac_documents(role_rules: list[dict] | None = None) -> list[dict]:
    docs = [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
    for doc in docs:
        doc.setdefault("metadata", {}).setdefault("labels", {})["app.kubernetes.io/managed-by"] = (
            "test"
        )
        if doc["kind"] == "ClusterRole" and role_rules is not None:
            doc["rules"] = role_rules
    return docs


def run_as_service_account(cp, cluster: Cluster, tmp_path: Path, rules=None) -> Cluster:
    """Binds the ServiceAccount to the role (deploy/kubernetes, or ``rules``) and points the
    portal's cluster at a kubeconfig holding the account's token."""
    cp.kubectl("create", "namespace", SA_NAMESPACE)
    cp.kubectl("create", "serviceaccount", SA_NAME, "-n", SA_NAMESPACE)
    for doc in rbac_documents(rules):
        cp.apply(doc)
    token = cp.kubectl(
        "create", "token", SA_NAME, "-n", SA_NAMESPACE, "--duration=1h"
    ).stdout.strip()
    kubeconfig = cp.token_kubeconfig(tmp_path / f"sa-{cluster.name}.kubeconfig", token)
    Cluster.objects.filter(pk=cluster.pk).update(
        connection=Cluster.Connection.KUBECONFIG,
        kubeconfig_path=str(kubeconfig),
        kubeconfig_context="controlplane",
    )
    cluster.refresh_from_db()
    return cluster


def scenario(cp, cluster: Cluster) -> list[SyncRun]:
    """Everything the portal does to a cluster: first sync, a change, drift restored, pruning
    (the schedulers switched off, per-pod maxima removed), a usage reading."""
    from django.contrib.auth.models import User

    admin = User.objects.get(username="admin")
    runs = [sync_now(cluster)]
    ns = TeamNamespace.objects.filter(cluster=cluster).order_by("name").first()
    allocation = Allocation.objects.filter(team_namespace=ns).first()
    allocation_set(
        team_namespace=ns,
        resource=allocation.resource,
        guarantee=allocation.guarantee,
        cap=allocation.cap + 1,
        per_pod_max=allocation.per_pod_max,
        priority_classes=list(allocation.priority_classes),
        acting_user=admin,
        reason="test: a change",
    )
    runs.append(sync_now(cluster, trigger="change"))
    training = PriorityClass.objects.get(name="training")
    training.description = "Scheduled training (test: a change)"
    priority_class_save(priority_class=training, acting_user=admin)
    runs.append(sync_now(cluster, trigger="change"))
    cp.kubectl(
        "patch",
        "resourcequota",
        "gpu-quota",
        "-n",
        ns.name,
        "--type=merge",
        "--field-manager=operator",
        "-p",
        '{"spec":{"hard":{"requests.cpu":"1"}}}',
    )
    runs.append(sync_now(cluster))
    # Why work waits, read with the schedulers still on (their Workloads or PodGroups).
    read = waits_of_namespaces(TeamNamespace.objects.filter(cluster=cluster))
    assert read and all(entry["error"] == "" for entry in read), read
    # Pruning: every scheduler's objects, and every namespace's per-pod max.
    Cluster.objects.filter(pk=cluster.pk).update(
        volcano_enabled=False, kueue_enabled=False, yunikorn_enabled=False
    )
    # (Every cluster's: the class to delete must be allowed nowhere.)
    for a in Allocation.objects.all():
        allocation_set(
            team_namespace=a.team_namespace,
            resource=a.resource,
            guarantee=a.guarantee,
            cap=a.cap,
            per_pod_max=None,
            priority_classes=[],
            acting_user=admin,
            reason="test: prune",
        )
    for limit in RunTimeLimit.objects.all():
        run_time_limit_delete(limit=limit, acting_user=admin)
    experiment = PriorityClass.objects.get(name="experiment")
    assert priority_class_delete_problems(priority_class=experiment) == []
    priority_class_delete(priority_class=experiment, acting_user=admin)
    cluster.refresh_from_db()
    runs.append(sync_now(cluster))
    usage_collect_cluster(cluster=cluster)
    return runs


def granted(rules: list[dict]) -> set[tuple[int, str]]:
    return {(i, verb) for i, rule in enumerate(rules) for verb in rule["verbs"]}


def used(rules: list[dict], events: list[dict]) -> set[tuple[int, str]]:
    """(rule index, verb) pairs some allowed request of the account needed. A server-side
    apply that creates its object (201) is authorized as a patch and as a create."""
    found = set()
    for event in events:
        ref = event.get("objectRef") or {}
        verbs = {event["verb"]}
        if event["verb"] == "patch" and event.get("responseStatus", {}).get("code") == 201:
            verbs.add("create")
        for i, rule in enumerate(rules):
            if (
                ref.get("apiGroup", "") in rule["apiGroups"]
                and ref.get("resource") in rule["resources"]
            ):
                found |= {(i, verb) for verb in verbs & set(rule["verbs"])}
    return found


@pytest.mark.parametrize("cluster_name", ["demo", "demo-mig"])
def test_the_sync_as_a_service_account_needs_every_verb_of_the_role_and_no_other(
    cluster_name, real_cluster, tmp_path
):
    call_command("seed_demo")
    cluster = Cluster.objects.get(name=cluster_name)
    if cluster.yunikorn_enabled:
        real_cluster.kubectl("create", "namespace", cluster.yunikorn_namespace)
    cluster = run_as_service_account(real_cluster, cluster, tmp_path)

    runs = scenario(real_cluster, cluster)

    for run in runs:
        assert run.status == SyncRun.Status.SUCCEEDED, (run.trigger, run.error)
    assert runs[-1].counts.get("deleted", 0) > 0, runs[-1].counts
    events = real_cluster.audit_events(SA_USER)
    refused = [e for e in events if e.get("responseStatus", {}).get("code") == 403]
    assert refused == [], [(e["verb"], e["requestURI"]) for e in refused]
    (role,) = [d for d in rbac_documents() if d["kind"] == "ClusterRole"]
    needed = used(role["rules"], events)
    # get reads single objects back (a write conflict, a change of few objects); the scenario
    # reaches it for some rules, not each, so it is required once, not per rule.
    assert any(verb == "get" for _, verb in needed)
    unused = {(i, v) for i, v in granted(role["rules"]) - needed if v != "get"}
    this_cluster_only = {
        # What only the other demo cluster's schedulers use (Volcano on demo; Kueue and
        # YuniKorn on demo-mig) is proven by its own parameter.
        (i, verb)
        for i, verb in unused
        if set(role["rules"][i]["apiGroups"])
        & ({"scheduling.volcano.sh"} if cluster_name == "demo-mig" else {"kueue.x-k8s.io"})
    }
    assert unused - this_cluster_only == set(), sorted(
        (role["rules"][i]["resources"], verb) for i, verb in unused - this_cluster_only
    )


def test_a_role_without_one_verb_makes_the_sync_fail(real_cluster, tmp_path):
    call_command("seed_demo")
    (role,) = [d for d in rbac_documents() if d["kind"] == "ClusterRole"]
    rules = copy.deepcopy(role["rules"])
    quota_rule = next(r for r in rules if "resourcequotas" in r["resources"])
    quota_rule["verbs"] = [v for v in quota_rule["verbs"] if v != "patch"]
    cluster = run_as_service_account(
        real_cluster, Cluster.objects.get(name="demo"), tmp_path, rules
    )

    run = sync_now(cluster)

    assert run.status == SyncRun.Status.FAILED
    assert "patch" in run.error or run.counts.get("error", 0) >= 1, (run.error, run.counts)
    assert real_cluster.get_json("resourcequotas", namespace="team-a-training")["items"] == []


def test_the_usage_collector_reads_running_and_pending_pods_with_their_wait(
    real_cluster, on_real_cluster
):
    call_command("seed_demo")
    cluster = on_real_cluster(Cluster.objects.get(name="demo"))
    assert sync_now(cluster).status == SyncRun.Status.SUCCEEDED
    ns = "team-a-training"
    for i in range(3):
        real_cluster.apply(
            {**gpu_pod(f"worker-{i}", 1), "metadata": {"name": f"worker-{i}", "namespace": ns}}
        )
    # Fits the quota but no node: it waits, Unschedulable.
    real_cluster.apply(
        {
            **gpu_pod("waiting", 2, nodeSelector={"pool": "none"}),
            "metadata": {"name": "waiting", "namespace": ns},
        }
    )

    def phases():
        pods = real_cluster.get_json("pods", namespace=ns)["items"]
        return sorted(p["status"].get("phase", "") for p in pods)

    poll("three pods running", lambda: phases() == ["Pending", "Running", "Running", "Running"])
    poll(
        "the waiting pod marked unschedulable",
        lambda: any(
            c["type"] == "PodScheduled" and c["status"] == "False"
            for c in real_cluster.get_json("pod", "waiting", ns)["status"].get("conditions", [])
        ),
    )
    time.sleep(1.1)

    assert usage_collect_cluster(cluster=cluster) >= 1
    sample = UsageSample.objects.get(team_namespace__name=ns, resource__name="nvidia.com/gpu")
    assert sample.allocated == 3
    assert sample.pending == 2 and sample.pending_pods == 1
    assert sample.wait_seconds is not None and sample.wait_seconds >= 1
    assert sample.timestamp <= timezone.now()
    # The Volcano queue named after the namespace exists; its allocation is Volcano's (pods
    # bound by kube-scheduler are not in it).
    assert real_cluster.get_json("queues.scheduling.volcano.sh", ns) is not None
