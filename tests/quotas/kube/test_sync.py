"""Sync against the sandbox API server: render -> apply -> read back, idempotence, drift,
shadow and report-only modes, pruning, fencing and the lease."""

import json
from decimal import Decimal

import pytest
import yaml
from django.core.management import call_command
from django.db import connection
from kubernetes import client as k8s

from kubesandbox import SandboxServer
from quotas.kube.client import KubeClient
from quotas.kube.render import GENERATION_ANNOTATION
from quotas.kube.sync import SyncBusy, cluster_preview, cluster_sync, lease_acquire
from quotas.models import (
    Allocation,
    Cluster,
    DriftEvent,
    ManagedObject,
    Resource,
    SyncObjectResult,
    SyncRequest,
    SyncRun,
    TeamNamespace,
)
from quotas.services import (
    allocation_set,
    cluster_set_sync_mode,
    cluster_sync_request,
    team_namespace_set_shadow,
)
from tests.support.kube import api_client_for

pytestmark = pytest.mark.django_db

GPU_QUOTA = "requests.nvidia.com/gpu"


@pytest.fixture
def mig_sandbox():
    """A second API server: each cluster of the demo has its own."""
    server = SandboxServer(host="127.0.0.1", port=0).start()
    yield server
    server.stop()


@pytest.fixture
def demo(kube_sandbox, mig_sandbox):
    """The seed demo: cluster demo on kube_sandbox, demo-mig (with YuniKorn's namespace, as
    its installer leaves it) on mig_sandbox."""
    call_command("seed_demo", verbosity=0)
    Cluster.objects.filter(name="demo").update(sandbox_url=kube_sandbox.url)
    Cluster.objects.filter(name="demo-mig").update(sandbox_url=mig_sandbox.url)
    kube = KubeClient.for_url(mig_sandbox.url)
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "yunikorn"}})
    kube.close()
    return {c.name: c for c in Cluster.objects.all()}


@pytest.fixture
def demo_admin(demo):
    from django.contrib.auth.models import User

    return User.objects.get(username="admin")


def sync(cluster, trigger=SyncRun.Trigger.CHANGE) -> SyncRun:
    return cluster_sync(cluster_id=cluster.id, trigger=trigger)


def core(kube_client) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(kube_client)


def custom(kube_client) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(kube_client)


def test_every_backend_reads_back_equal_to_the_allocations(demo, kube_sandbox, mig_sandbox):
    for cluster in demo.values():
        run = sync(cluster)
        assert run.status == SyncRun.Status.SUCCEEDED, run.error
    servers = {"demo": kube_sandbox, "demo-mig": mig_sandbox}
    for allocation in Allocation.objects.select_related("team_namespace__cluster", "resource"):
        ns = allocation.team_namespace
        res = allocation.resource.name
        kube_client = api_client_for(servers[ns.cluster.name])
        v1 = core(kube_client)
        crd = custom(kube_client)
        quota = v1.read_namespaced_resource_quota("gpu-quota", ns.name)
        assert Decimal(quota.spec.hard[f"requests.{res}"]) == allocation.cap
        labels = v1.read_namespace(ns.name).metadata.labels
        assert labels["app.kubernetes.io/managed-by"] == "gpu-quota-portal"
        assert labels["quota-portal/team"] == ns.team.slug
        if allocation.per_pod_max:
            annotations = v1.read_namespace(ns.name).metadata.annotations
            assert Decimal(annotations[f"quota-portal/per-pod-max.{res.replace('/', '_')}"]) == (
                allocation.per_pod_max
            )
        if ns.cluster.volcano_enabled:
            queue = crd.get_cluster_custom_object(
                "scheduling.volcano.sh", "v1beta1", "queues", ns.name
            )
            assert Decimal(queue["spec"]["deserved"][res]) == allocation.guarantee
            assert Decimal(queue["spec"]["capability"][res]) == allocation.cap
            assert queue["spec"]["reclaimable"] is True
        if ns.cluster.kueue_enabled:
            cq = crd.get_cluster_custom_object(
                "kueue.x-k8s.io", "v1beta2", "clusterqueues", ns.name
            )
            [resource] = [
                r
                for group in cq["spec"]["resourceGroups"]
                for flavor in group["flavors"]
                for r in flavor["resources"]
                if r["name"] == res
            ]
            assert Decimal(resource["nominalQuota"]) == allocation.guarantee
            assert Decimal(resource["borrowingLimit"]) == allocation.cap - allocation.guarantee
            lq = crd.get_namespaced_custom_object(
                "kueue.x-k8s.io", "v1beta2", ns.name, "localqueues", "default"
            )
            assert lq["spec"]["clusterQueue"] == ns.name
        if ns.cluster.yunikorn_enabled:
            cm = v1.read_namespaced_config_map("yunikorn-configs", "yunikorn")
            queues = yaml.safe_load(cm.data["queues.yaml"])
            found = _yunikorn_queue(queues, ns.name)
            assert Decimal(str(found["resources"]["guaranteed"][res])) == allocation.guarantee
            assert Decimal(str(found["resources"]["max"][res])) == allocation.cap
        kube_client.close()
    kube_client = api_client_for(kube_sandbox)
    classes = {
        p.metadata.name: p for p in k8s.SchedulingV1Api(kube_client).list_priority_class().items
    }
    kube_client.close()
    assert classes["production-inference"].value == 100000
    assert classes["experiment"].preemption_policy == "Never"


def _yunikorn_queue(config: dict, name: str) -> dict:
    def walk(queues):
        for q in queues or []:
            if q["name"] == name:
                return q
            found = walk(q.get("queues"))
            if found:
                return found
        return None

    for partition in config["partitions"]:
        found = walk(partition["queues"])
        if found:
            return found
    raise AssertionError(f"queue {name} not in queues.yaml")


def test_resync_of_an_unchanged_cluster_writes_nothing(demo, kube_sandbox, mig_sandbox):
    for cluster in demo.values():
        sync(cluster)
    kube_sandbox.stats.reset()
    mig_sandbox.stats.reset()
    for cluster in demo.values():
        run = sync(cluster, SyncRun.Trigger.RECONCILE)
        assert set(run.counts) == {"unchanged"}, run.counts
    assert kube_sandbox.stats.writes == 0
    assert mig_sandbox.stats.writes == 0


def test_a_change_writes_only_what_changed_and_marks_the_request_done(
    demo, kube_sandbox, demo_admin
):
    cluster = demo["demo"]
    sync(cluster)
    ns = TeamNamespace.objects.get(name="team-c-dev", cluster__name="demo")
    gpu = Resource.objects.get(name="nvidia.com/gpu")
    allocation_set(
        team_namespace=ns,
        resource=gpu,
        guarantee=3,
        cap=4,
        priority_classes=["experiment"],
        acting_user=demo_admin,
    )
    request = cluster_sync_request(cluster=cluster, acting_user=demo_admin, reason="test")
    kube_sandbox.stats.reset()
    run = sync(cluster)
    # The Volcano queue's deserved changed; the quota (cap 4) did not.
    assert run.counts == {"unchanged": run.objects_total - 1, "updated": 1}, run.counts
    assert kube_sandbox.stats.writes == 1
    queue = kube_sandbox.get_object("scheduling.volcano.sh/v1beta1", "Queue", "team-c-dev")
    assert queue["spec"]["deserved"]["nvidia.com/gpu"] == "3"
    assert int(queue["metadata"]["annotations"][GENERATION_ANNOTATION]) == run.generation
    request.refresh_from_db()
    assert (request.status, request.sync_run_id) == (SyncRequest.Status.DONE, run.id)
    assert request.attempts == 1  # the run that succeeded is an attempt too


def _edit_quota_by_hand(kube_sandbox, namespace: str, value: str) -> None:
    kube = KubeClient.for_url(kube_sandbox.url)
    live = kube.get("v1", "ResourceQuota", namespace, "gpu-quota")
    live["spec"]["hard"][GPU_QUOTA] = value
    kube.replace(live)
    kube.close()


def test_drift_is_detected_recorded_and_restored(demo, kube_sandbox):
    cluster = demo["demo"]
    sync(cluster)
    _edit_quota_by_hand(kube_sandbox, "team-a-training", "16")
    run = sync(cluster, SyncRun.Trigger.RECONCILE)
    drift = DriftEvent.objects.get(run=run)
    assert (drift.kind, drift.namespace, drift.name) == (
        "ResourceQuota",
        "team-a-training",
        "gpu-quota",
    )
    assert drift.changes == [{"path": f"spec.hard.{GPU_QUOTA}", "old": "10", "new": "16"}]
    assert drift.restored
    live = kube_sandbox.get_object("v1", "ResourceQuota", "gpu-quota", "team-a-training")
    assert live["spec"]["hard"][GPU_QUOTA] == "10"
    assert run.counts.get("drift_restored") == 1


def test_deleted_object_is_drift_and_recreated(demo, kube_sandbox):
    cluster = demo["demo"]
    sync(cluster)
    kube = KubeClient.for_url(kube_sandbox.url)
    kube.delete("scheduling.volcano.sh/v1beta1", "Queue", "", "team-b-inference")
    run = sync(cluster, SyncRun.Trigger.RECONCILE)
    drift = DriftEvent.objects.get(run=run)
    assert (drift.kind, drift.name, drift.changes[0]["new"]) == (
        "Queue",
        "team-b-inference",
        "deleted",
    )
    assert kube.get("scheduling.volcano.sh/v1beta1", "Queue", "", "team-b-inference")
    kube.close()


def test_report_only_records_drift_without_restoring(demo, kube_sandbox, demo_admin):
    cluster = demo["demo"]
    sync(cluster)
    cluster_set_sync_mode(
        cluster=cluster, mode="report_only", acting_user=demo_admin, comment="canary"
    )
    _edit_quota_by_hand(kube_sandbox, "team-a-training", "12")
    run = sync(cluster, SyncRun.Trigger.RECONCILE)
    drift = DriftEvent.objects.get(run=run)
    assert not drift.restored
    live = kube_sandbox.get_object("v1", "ResourceQuota", "gpu-quota", "team-a-training")
    assert live["spec"]["hard"][GPU_QUOTA] == "12"
    # An approved change of that object is still written in report-only mode.
    ns = TeamNamespace.objects.get(name="team-a-training")
    allocation_set(
        team_namespace=ns,
        resource=Resource.objects.get(name="nvidia.com/gpu"),
        guarantee=6,
        cap=8,
        acting_user=demo_admin,
    )
    sync(cluster)
    live = kube_sandbox.get_object("v1", "ResourceQuota", "gpu-quota", "team-a-training")
    assert live["spec"]["hard"][GPU_QUOTA] == "8"


def test_shadow_cluster_writes_nothing_but_reports_what_it_would_do(demo, kube_sandbox, demo_admin):
    cluster = demo["demo"]
    cluster_set_sync_mode(
        cluster=cluster, mode="shadow", acting_user=demo_admin, comment="first look"
    )
    kube_sandbox.stats.reset()
    run = sync(cluster)
    assert kube_sandbox.stats.writes == 0
    assert set(run.counts) == {"shadow"}
    quota = SyncObjectResult.objects.get(
        run=run, kind="ResourceQuota", namespace="team-a-training", name="gpu-quota"
    )
    assert quota.diff and quota.diff[-1]["path"] == "spec"
    assert quota.diff[-1]["new"]["hard"][GPU_QUOTA] == "10"
    from quotas.models import AuditEvent

    event = AuditEvent.objects.get(action="cluster.sync_mode")
    assert (event.before, event.after, event.actor) == (
        {"sync_mode": "enforce"},
        {"sync_mode": "shadow"},
        demo_admin,
    )


def test_shadow_namespace_is_left_alone_while_others_are_written(demo, kube_sandbox, demo_admin):
    cluster = demo["demo"]
    ns = TeamNamespace.objects.get(name="team-c-dev", cluster__name="demo")
    team_namespace_set_shadow(team_namespace=ns, shadow=True, acting_user=demo_admin)
    run = sync(cluster)
    assert kube_sandbox.get_object("v1", "ResourceQuota", "gpu-quota", "team-a-training")
    assert kube_sandbox.get_object("v1", "Namespace", "team-c-dev") is None
    assert kube_sandbox.get_object("scheduling.volcano.sh/v1beta1", "Queue", "team-c-dev") is None
    shadowed = SyncObjectResult.objects.filter(run=run, action="shadow")
    assert {r.name for r in shadowed} >= {"team-c-dev", "gpu-quota"}


def test_objects_no_longer_wanted_are_pruned_but_namespaces_kept(demo, kube_sandbox):
    cluster = demo["demo"]
    sync(cluster)
    Allocation.objects.filter(team_namespace__name="team-c-dev").delete()
    run = sync(cluster)
    assert kube_sandbox.get_object("v1", "ResourceQuota", "gpu-quota", "team-c-dev") is None
    assert kube_sandbox.get_object("scheduling.volcano.sh/v1beta1", "Queue", "team-c-dev") is None
    assert kube_sandbox.get_object("v1", "Namespace", "team-c-dev") is not None
    assert run.counts["deleted"] >= 2
    assert not ManagedObject.objects.filter(namespace="team-c-dev", kind="ResourceQuota").exists()


def test_objects_without_the_portal_label_are_never_pruned(demo, kube_sandbox):
    cluster = demo["demo"]
    sync(cluster)
    kube = KubeClient.for_url(kube_sandbox.url)
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "hand-made", "namespace": "team-a-training"},
            "spec": {"hard": {"pods": "10"}},
        }
    )
    sync(cluster)
    assert kube.get("v1", "ResourceQuota", "team-a-training", "hand-made")
    kube.close()


def test_an_older_generation_never_overwrites_a_newer_one(demo, kube_sandbox):
    cluster = demo["demo"]
    sync(cluster)
    kube = KubeClient.for_url(kube_sandbox.url)
    live = kube.get("v1", "ResourceQuota", "team-a-training", "gpu-quota")
    newer = cluster.__class__.objects.get(pk=cluster.pk).plan_generation + 5
    live["metadata"]["annotations"][GENERATION_ANNOTATION] = str(newer)
    live["spec"]["hard"][GPU_QUOTA] = "9"  # what the newer sync wrote
    kube.replace(live)
    run = sync(cluster, SyncRun.Trigger.RECONCILE)
    assert run.counts.get("fenced") == 1
    assert (
        kube.get("v1", "ResourceQuota", "team-a-training", "gpu-quota")["spec"]["hard"][GPU_QUOTA]
        == "9"
    )
    kube.close()


def test_a_second_sync_of_the_same_cluster_waits_for_the_lease(demo):
    cluster = demo["demo"]
    assert lease_acquire(cluster.id, "other-worker") is not None
    with pytest.raises(SyncBusy):
        sync(cluster)
    assert not SyncRun.objects.filter(cluster=cluster).exists()


def test_expired_lease_is_taken_over(demo):
    from datetime import timedelta

    cluster = demo["demo"]
    assert lease_acquire(cluster.id, "dead-worker", ttl=timedelta(seconds=-1)) is not None
    assert sync(cluster).status == SyncRun.Status.SUCCEEDED


def test_a_run_left_running_by_a_dead_worker_is_closed_by_the_next_sync(demo):
    """A worker killed mid-sync leaves its run "running" and its sync request pending; the
    sync that takes the expired lease marks the run failed (not running for ever) and does
    the pending work."""
    from datetime import timedelta

    cluster, other = demo["demo"], demo["demo-mig"]
    pending = cluster_sync_request(cluster=cluster, acting_user=None, reason="before the kill")
    lease_acquire(cluster.id, "killed-worker", ttl=timedelta(seconds=-1))
    dead = SyncRun.objects.create(cluster=cluster, trigger="change", mode="enforce", worker="w1")
    elsewhere = SyncRun.objects.create(cluster=other, trigger="change", mode="enforce")

    run = sync(cluster)

    dead.refresh_from_db()
    assert dead.status == SyncRun.Status.FAILED and dead.finished_at is not None
    assert dead.error.startswith("abandoned: the worker running this sync stopped")
    assert run.status == SyncRun.Status.SUCCEEDED
    pending.refresh_from_db()
    assert (pending.status, pending.sync_run_id) == (SyncRequest.Status.DONE, run.pk)
    # Another cluster's run is another lease's business.
    elsewhere.refresh_from_db()
    assert elsewhere.status == SyncRun.Status.RUNNING


@pytest.mark.skipif(connection.vendor != "postgresql", reason="cuts its own PostgreSQL session")
@pytest.mark.django_db(transaction=True)
def test_a_sync_cut_off_from_the_database_still_releases_its_lease(demo):
    """The database drops the sync's session after the writes (a failover): the run cannot be
    recorded, but the lease is released on a new connection, so the retry syncs at once
    instead of waiting out SYNC_LEASE_SECONDS. The session is terminated for real, by the
    server, just before the sync records the results of its writes (Django's execute_wrapper
    sees that statement)."""
    import contextlib

    from django.db import InterfaceError, OperationalError

    from quotas.models import SyncLease, SyncObjectResult

    cluster = demo["demo"]
    recording = f'INSERT INTO "{SyncObjectResult._meta.db_table}"'
    cut = []

    def cut_off_before_recording(execute, sql, params, many, context):
        if sql.startswith(recording) and not cut:
            cut.append(sql)
            with contextlib.suppress(OperationalError), connection.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return execute(sql, params, many, context)

    with (
        connection.execute_wrapper(cut_off_before_recording),
        pytest.raises((OperationalError, InterfaceError)),
    ):
        sync(cluster)
    assert cut, "the sync recorded no result"
    lease = SyncLease.objects.get(cluster=cluster)
    assert (lease.holder, lease.expires_at) == ("", None)
    assert sync(cluster).status == SyncRun.Status.SUCCEEDED


def test_a_sync_that_cannot_take_the_lease_leaves_the_running_run_alone(demo):
    cluster = demo["demo"]
    lease_acquire(cluster.id, "live-worker")
    live = SyncRun.objects.create(cluster=cluster, trigger="change", mode="enforce")
    with pytest.raises(SyncBusy):
        sync(cluster)
    live.refresh_from_db()
    assert live.status == SyncRun.Status.RUNNING


def test_preview_shows_the_pending_change_from_a_server_dry_run(demo, kube_sandbox, demo_admin):
    cluster = demo["demo"]
    sync(cluster)
    ns = TeamNamespace.objects.get(name="team-b-inference")
    allocation_set(
        team_namespace=ns,
        resource=Resource.objects.get(name="nvidia.com/gpu"),
        guarantee=4,
        cap=7,
        acting_user=demo_admin,
    )
    kube_sandbox.stats.reset()
    changes = cluster_preview(cluster_id=cluster.id)
    assert kube_sandbox.stats.writes == 0  # dry runs persist nothing
    by_kind = {(o.key[1], o.key[3]): o for o in changes}
    quota = by_kind[("ResourceQuota", "gpu-quota")]
    assert {"path": f"spec.hard.{GPU_QUOTA}", "old": "6", "new": "7"} in quota.diff
    assert ("Queue", "team-b-inference") in by_kind
    live = kube_sandbox.get_object("v1", "ResourceQuota", "gpu-quota", "team-b-inference")
    assert live["spec"]["hard"][GPU_QUOTA] == "6"


def test_permanent_error_is_recorded_and_the_request_failed_visibly(demo, mig_sandbox, demo_admin):
    cluster = demo["demo-mig"]
    kube = KubeClient.for_url(mig_sandbox.url)
    kube.delete("v1", "Namespace", "", "yunikorn")  # YuniKorn not installed after all
    kube.close()
    request = cluster_sync_request(cluster=cluster, acting_user=demo_admin, reason="test")
    run = sync(cluster)
    assert run.status == SyncRun.Status.FAILED
    assert "yunikorn" in run.error
    error = SyncObjectResult.objects.get(run=run, action="error")
    assert error.kind == "ConfigMap" and "404" in error.error
    request.refresh_from_db()
    assert request.status == SyncRequest.Status.FAILED and request.attempts == 1
    assert json.dumps(run.counts)


def test_runs_record_rows_only_for_what_they_changed_and_count_the_rest(demo, kube_sandbox):
    cluster = demo["demo"]
    first = sync(cluster)
    assert SyncObjectResult.objects.filter(run=first).count() == first.objects_total
    for trigger in (SyncRun.Trigger.RECONCILE, SyncRun.Trigger.CHANGE, SyncRun.Trigger.MANUAL):
        again = sync(cluster, trigger)
        assert again.objects_total == first.objects_total
        assert again.counts == {"unchanged": first.objects_total}
        assert not SyncObjectResult.objects.filter(run=again).exists()
