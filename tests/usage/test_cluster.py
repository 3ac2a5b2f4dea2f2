"""Usage read from a cluster: pods in several namespaces and phases on the Kubernetes API test
server, Volcano and Kueue queue status, evictions counted once."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from quotas.kube.client import KubeClient, object_path
from quotas.kube.render import KUEUE_API, VOLCANO_API
from quotas.models import Cluster, TeamNamespace
from quotas.services import allocation_set
from usage.cluster import eviction_time, readings_from_pods, usage_collect_cluster
from usage.models import UsageSample


def iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(namespace, name, phase, gpus, *, conditions=(), reason=None, created=None):
    status = {"phase": phase}
    if conditions:
        status["conditions"] = list(conditions)
    if reason:
        status["reason"] = reason
    meta = {"name": name, "namespace": namespace}
    if created:
        meta["creationTimestamp"] = created
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
            ]
        },
        "status": status,
    }


def condition(type_, status, when, reason=""):
    return {"type": type_, "status": status, "lastTransitionTime": iso(when), "reason": reason}


@pytest.fixture
def sandbox_cluster(kube_sandbox, cluster, alloc_a, alloc_b, team_a, gpu, admin):
    Cluster.objects.filter(pk=cluster.pk).update(
        sandbox_url=kube_sandbox.url, volcano_enabled=True, kueue_enabled=True
    )
    cluster.refresh_from_db()
    ns_c = TeamNamespace.objects.create(team=team_a, cluster=cluster, name="team-a-dev")
    allocation_set(team_namespace=ns_c, resource=gpu, guarantee=0, cap=2, acting_user=admin)
    kube = KubeClient.for_url(kube_sandbox.url)
    for name in ("team-a-training", "team-b-inference", "team-a-dev", "unmanaged"):
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield cluster, kube
    kube.close()


@pytest.mark.django_db
def test_collector_reads_pods_in_several_namespaces_and_phases(sandbox_cluster, gpu):
    cluster, kube = sandbox_cluster
    now = timezone.now() + timedelta(minutes=10)  # pods were created "ten minutes ago"
    recent = now - timedelta(minutes=2)
    for obj in (
        pod("team-a-training", "train-1", "Running", "4"),
        pod("team-a-training", "train-2", "Running", "2"),
        pod("team-a-training", "waiting-1", "Pending", "8"),
        pod("team-a-training", "waiting-2", "Pending", "1"),
        pod("team-a-training", "done", "Succeeded", "8"),
        # Preempted by the scheduler: still running while it stops, counted as an eviction.
        pod(
            "team-a-training",
            "preempted",
            "Running",
            "1",
            conditions=[condition("DisruptionTarget", "True", recent, "PreemptionByScheduler")],
        ),
        # Evicted by the kubelet long ago: before the previous sample, not counted again.
        pod(
            "team-a-training",
            "old-evicted",
            "Failed",
            "1",
            reason="Evicted",
            conditions=[condition("Ready", "False", now - timedelta(days=1))],
        ),
        pod("team-b-inference", "serve", "Running", "3"),
        pod(
            "team-b-inference",
            "evicted",
            "Failed",
            "2",
            reason="Evicted",
            conditions=[condition("Ready", "False", recent)],
        ),
        pod("unmanaged", "other", "Running", "8"),
    ):
        kube.create(obj)
    # The previous sample was five minutes ago.
    UsageSample.objects.create(
        team_namespace=TeamNamespace.objects.get(name="team-a-training"),
        resource=gpu,
        timestamp=now - timedelta(minutes=5),
        allocated=0,
        source="cluster",
    )

    assert usage_collect_cluster(cluster=cluster, now=now) == 3
    samples = {
        s.team_namespace.name: s
        for s in UsageSample.objects.filter(timestamp=now).select_related("team_namespace")
    }
    a = samples["team-a-training"]
    assert (a.allocated, a.pending, a.pending_pods, a.evictions) == (7, 9, 2, 1)
    assert 595 <= a.wait_seconds <= 660  # created about ten minutes before "now"
    b = samples["team-b-inference"]
    assert (b.allocated, b.pending, b.wait_seconds, b.evictions) == (3, 0, None, 1)
    dev = samples["team-a-dev"]
    assert (dev.allocated, dev.pending, dev.evictions) == (0, 0, 0)
    assert "unmanaged" not in samples

    # Read again at the same time (a retried task): replaced, not added.
    assert usage_collect_cluster(cluster=cluster, now=now) == 3
    assert UsageSample.objects.filter(timestamp=now).count() == 3
    # Five minutes later the same evictions are not counted again.
    usage_collect_cluster(cluster=cluster, now=now + timedelta(minutes=5))
    later = UsageSample.objects.filter(timestamp=now + timedelta(minutes=5))
    assert sum(s.evictions for s in later) == 0


@pytest.mark.django_db
def test_collector_reads_volcano_and_kueue_queue_status(sandbox_cluster, gpu):
    cluster, kube = sandbox_cluster
    kube.create(
        {
            "apiVersion": VOLCANO_API,
            "kind": "Queue",
            "metadata": {"name": "team-a-training"},
            "spec": {"weight": 1},
        }
    )
    queue = kube.get(VOLCANO_API, "Queue", "", "team-a-training")
    queue["status"] = {"allocated": {"nvidia.com/gpu": "5", "cpu": "10"}}
    kube.request(
        "PUT", object_path(VOLCANO_API, "Queue", "", "team-a-training") + "/status", body=queue
    )
    kube.create(
        {
            "apiVersion": KUEUE_API,
            "kind": "ClusterQueue",
            "metadata": {"name": "team-b-inference"},
            "spec": {"cohortName": "portal", "namespaceSelector": {}},
        }
    )
    cq = kube.get(KUEUE_API, "ClusterQueue", "", "team-b-inference")
    cq["status"] = {
        "flavorsUsage": [
            {
                "name": "a100",
                "resources": [{"name": "nvidia.com/gpu", "total": "6", "borrowed": "2"}],
            },
            {
                "name": "h100",
                "resources": [{"name": "nvidia.com/gpu", "total": "1", "borrowed": "0"}],
            },
        ]
    }
    kube.request(
        "PUT", object_path(KUEUE_API, "ClusterQueue", "", "team-b-inference") + "/status", body=cq
    )
    usage_collect_cluster(cluster=cluster)
    samples = {
        s.team_namespace.name: s for s in UsageSample.objects.select_related("team_namespace")
    }
    assert samples["team-a-training"].queue_allocated == 5
    assert samples["team-a-training"].queue_borrowed is None
    assert (
        samples["team-b-inference"].queue_allocated,
        samples["team-b-inference"].queue_borrowed,
    ) == (7, 2)
    assert samples["team-a-dev"].queue_allocated is None


def test_eviction_signals_kubernetes_sets():
    when = datetime(2025, 3, 1, tzinfo=UTC)
    disrupted = pod(
        "n",
        "p",
        "Running",
        "1",
        conditions=[condition("DisruptionTarget", "True", when, "EvictionByEvictionAPI")],
    )
    assert eviction_time(disrupted) == when
    not_yet = pod(
        "n", "p", "Running", "1", conditions=[condition("DisruptionTarget", "False", when)]
    )
    assert eviction_time(not_yet) is None
    kueue = pod("n", "p", "Running", "1", conditions=[condition("TerminationTarget", "True", when)])
    assert eviction_time(kueue) == when
    kubelet = pod("n", "p", "Failed", "1", reason="Preempting", created=iso(when))
    assert eviction_time(kubelet) == when
    assert eviction_time(pod("n", "p", "Failed", "1", reason="OOMKilled")) is None


def test_wait_falls_back_to_the_unschedulable_condition():
    now = datetime(2025, 3, 1, 12, tzinfo=UTC)
    waiting = pod(
        "n",
        "w",
        "Pending",
        "2",
        conditions=[condition("PodScheduled", "False", now - timedelta(hours=1), "Unschedulable")],
    )
    readings = readings_from_pods(
        [waiting], {"n": ["nvidia.com/gpu"]}, now=now, evicted_after={"n": now}
    )
    assert readings[("n", "nvidia.com/gpu")].wait_seconds == 3600
    assert readings[("n", "nvidia.com/gpu")].pending == Decimal(2)


@pytest.mark.django_db
def test_beat_tasks_collect_and_roll_up(sandbox_cluster, gpu):
    from usage.models import UsageDaily
    from usage.tasks import collect_cluster_usage, rollup_usage

    cluster, kube = sandbox_cluster
    kube.create(pod("team-b-inference", "serve", "Running", "3"))
    collect_cluster_usage(cluster.pk)
    assert UsageSample.objects.get(team_namespace__name="team-b-inference").allocated == 3
    assert rollup_usage() == 3
    assert UsageDaily.objects.get(team_namespace__name="team-b-inference").peak == 3


@pytest.mark.django_db
def test_an_unreachable_cluster_is_reported_not_raised(cluster, alloc_a):
    from usage.collect import usage_collect

    result = usage_collect(cluster_id=cluster.pk)  # the test settings point at port 9
    assert str(result["cluster"]).startswith("error:")
    assert not UsageSample.objects.exists()
