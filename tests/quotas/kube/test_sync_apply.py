"""Server-side apply against the sandbox API server: fields others own survive, the generation
fence under apply, YuniKorn's shared ConfigMap, a change sync that costs what changed, missing
schedulers found by discovery, previews of new namespaces, hierarchy write order."""

from decimal import Decimal

import pytest
from django.core.management import call_command

from kubesandbox import SandboxServer
from quotas.kube.client import KubeClient
from quotas.kube.render import GENERATION_ANNOTATION
from quotas.kube.sync import cluster_preview, cluster_sync
from quotas.models import (
    Cluster,
    ClusterCapacity,
    DriftEvent,
    ManagedObject,
    Resource,
    SyncObjectResult,
    SyncRequest,
    SyncRun,
    Team,
    TeamNamespace,
)
from quotas.services import allocation_set, cluster_plan_touch, cluster_sync_request

pytestmark = pytest.mark.django_db

GPU_QUOTA = "requests.nvidia.com/gpu"
KUEUE = "kueue.x-k8s.io/v1beta2"
VOLCANO = "scheduling.volcano.sh/v1beta1"
MERGE_PATCH = "application/merge-patch+json"


def sync(cluster, trigger=SyncRun.Trigger.CHANGE, **kwargs) -> SyncRun:
    return cluster_sync(cluster_id=cluster.id, trigger=trigger, **kwargs)


def _seed(kube_sandbox, mig_server):
    call_command("seed_demo", verbosity=0)
    Cluster.objects.filter(name="demo").update(sandbox_url=kube_sandbox.url)
    Cluster.objects.filter(name="demo-mig").update(sandbox_url=mig_server.url)
    kube = KubeClient.for_url(mig_server.url)
    kube.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "yunikorn"}},
        field_manager="helm",
    )
    kube.close()
    from django.contrib.auth.models import User

    return {c.name: c for c in Cluster.objects.all()}, User.objects.get(username="admin")


@pytest.fixture
def mig_sandbox():
    server = SandboxServer(host="127.0.0.1", port=0).start()
    yield server
    server.stop()


@pytest.fixture
def demo(kube_sandbox, mig_sandbox):
    return _seed(kube_sandbox, mig_sandbox)


def _by_hand(server, api_version, kind, namespace, name, patch, manager="kubectl-edit"):
    """A merge patch by another field manager (an operator, kubectl edit)."""
    kube = KubeClient.for_url(server.url)
    path = kube_path(api_version, kind, namespace, name)
    kube.request(
        "PATCH", path, query={"fieldManager": manager}, body=patch, content_type=MERGE_PATCH
    )
    kube.close()


def kube_path(*key):
    from quotas.kube.client import object_path

    return object_path(*key)


def _change(admin, cluster_name, namespace, resource, guarantee, cap, **extra):
    ns = TeamNamespace.objects.get(name=namespace, cluster__name=cluster_name)
    allocation_set(
        team_namespace=ns,
        resource=Resource.objects.get(name=resource),
        guarantee=guarantee,
        cap=cap,
        acting_user=admin,
        **extra,
    )
    return cluster_sync_request(cluster=ns.cluster, acting_user=admin, reason="test")


# --- item 8: server-side apply, one field manager ----------------------------------------------


def test_a_cap_change_keeps_an_operators_stop_policy_and_a_hand_added_pods_quota(demo, mig_sandbox):
    clusters, admin = demo
    cluster = clusters["demo-mig"]
    assert sync(cluster).status == SyncRun.Status.SUCCEEDED
    _by_hand(mig_sandbox, KUEUE, "ClusterQueue", "", "team-b-dev", {"spec": {"stopPolicy": "Hold"}})
    _by_hand(
        mig_sandbox,
        "v1",
        "ResourceQuota",
        "team-b-dev",
        "gpu-quota",
        {"spec": {"hard": {"pods": "50"}}},
    )
    _change(admin, "demo-mig", "team-b-dev", "nvidia.com/mig-1g.10gb", 4, 5, per_pod_max=2)
    run = sync(cluster)
    assert run.status == SyncRun.Status.SUCCEEDED, run.error

    queue = mig_sandbox.get_object(KUEUE, "ClusterQueue", "team-b-dev")
    assert queue["spec"]["stopPolicy"] == "Hold"
    [resource] = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert resource["borrowingLimit"] == "1"  # cap 5 - guarantee 4: the change landed
    quota = mig_sandbox.get_object("v1", "ResourceQuota", "gpu-quota", "team-b-dev")
    assert quota["spec"]["hard"]["pods"] == "50"
    assert quota["spec"]["hard"]["requests.nvidia.com/mig-1g.10gb"] == "5"
    # Fields the portal does not own are no drift, and the portal is their owner nowhere.
    assert not DriftEvent.objects.exists()
    managers = {e["manager"]: e for e in quota["metadata"]["managedFields"]}
    assert managers["gpu-quota-portal"]["operation"] == "Apply"
    assert "f:pods" not in str(managers["gpu-quota-portal"]["fieldsV1"])
    # And a drift check afterwards still sees nothing to restore.
    check = sync(cluster, SyncRun.Trigger.RECONCILE)
    assert set(check.counts) == {"unchanged"}, check.counts


def test_a_hand_edit_of_a_field_the_portal_owns_is_drift_and_restored(demo, kube_sandbox):
    clusters, _admin = demo
    cluster = clusters["demo"]
    sync(cluster)
    _by_hand(
        kube_sandbox,
        "v1",
        "ResourceQuota",
        "team-a-training",
        "gpu-quota",
        {"spec": {"hard": {GPU_QUOTA: "16", "pods": "50"}}},
    )
    run = sync(cluster, SyncRun.Trigger.RECONCILE)
    drift = DriftEvent.objects.get(run=run)
    assert drift.changes == [{"path": f"spec.hard.{GPU_QUOTA}", "old": "10", "new": "16"}]
    hard = kube_sandbox.get_object("v1", "ResourceQuota", "gpu-quota", "team-a-training")["spec"][
        "hard"
    ]
    assert hard == {GPU_QUOTA: "10", "pods": "50"}


def test_a_field_the_portal_no_longer_renders_is_removed_by_the_apply(demo, kube_sandbox):
    clusters, admin = demo
    cluster = clusters["demo"]
    sync(cluster)
    # team-b-inference's allowed classes go away: its other-classes quota is pruned, and an
    # inference queue that becomes a dev queue loses its guarantee.
    ns = TeamNamespace.objects.get(name="team-b-inference")
    ns.workload_class = TeamNamespace.WorkloadClass.DEV
    ns.save()
    cluster_plan_touch(cluster_id=cluster.id)
    cluster_sync_request(cluster=cluster, acting_user=admin, reason="test")
    run = sync(cluster)
    assert run.status == SyncRun.Status.SUCCEEDED, run.error
    queue = kube_sandbox.get_object(VOLCANO, "Queue", "team-b-inference")
    assert "guarantee" not in queue["spec"]


def test_an_apply_racing_a_newer_write_is_fenced(demo, kube_sandbox):
    """Between the read and the apply a newer sync writes the object: the apply carries the
    resourceVersion it read, gets 409, reads again and leaves the newer object alone."""
    clusters, admin = demo
    cluster = clusters["demo"]
    sync(cluster)
    _change(admin, "demo", "team-a-training", "nvidia.com/gpu", 6, 9)
    newer = Cluster.objects.get(pk=cluster.pk).plan_generation + 5

    class Racing(KubeClient):
        raced = False

        def apply(self, obj, **kwargs):
            if obj["kind"] == "ResourceQuota" and not Racing.raced:
                Racing.raced = True
                other = KubeClient.for_url(kube_sandbox.url)
                live = other.get("v1", "ResourceQuota", "team-a-training", "gpu-quota")
                live["metadata"]["annotations"][GENERATION_ANNOTATION] = str(newer)
                live["spec"]["hard"][GPU_QUOTA] = "7"  # what the newer sync wrote
                for key in ("managedFields", "resourceVersion", "uid", "creationTimestamp"):
                    live["metadata"].pop(key, None)
                live.pop("status", None)
                other.apply(live, field_manager="gpu-quota-portal", force=True)
                other.close()
            return super().apply(obj, **kwargs)

    client = Racing.for_url(kube_sandbox.url)
    run = sync(cluster, client=client)
    client.close()
    assert Racing.raced
    assert run.counts.get("fenced") == 1, run.counts
    live = kube_sandbox.get_object("v1", "ResourceQuota", "gpu-quota", "team-a-training")
    assert live["spec"]["hard"][GPU_QUOTA] == "7"


# --- item 1: YuniKorn's ConfigMap is shared ----------------------------------------------------


def test_yunikorn_switched_off_removes_only_the_portals_key_and_keeps_the_configmap(
    demo, mig_sandbox
):
    clusters, admin = demo
    cluster = clusters["demo-mig"]
    sync(cluster)
    _by_hand(
        mig_sandbox,
        "v1",
        "ConfigMap",
        "yunikorn",
        "yunikorn-configs",
        {"data": {"log.level": "debug", "service.schedulingInterval": "1s"}},
        manager="helm",
    )
    Cluster.objects.filter(pk=cluster.pk).update(yunikorn_enabled=False)
    cluster_plan_touch(cluster_id=cluster.pk)
    cluster_sync_request(cluster=cluster, acting_user=admin, reason="YuniKorn off")
    run = sync(cluster)
    assert run.status == SyncRun.Status.SUCCEEDED, run.error
    configmap = mig_sandbox.get_object("v1", "ConfigMap", "yunikorn-configs", "yunikorn")
    assert configmap is not None
    assert configmap["data"] == {"log.level": "debug", "service.schedulingInterval": "1s"}
    labels = configmap["metadata"].get("labels") or {}
    assert "app.kubernetes.io/managed-by" not in labels
    assert GENERATION_ANNOTATION not in (configmap["metadata"].get("annotations") or {})
    result = SyncObjectResult.objects.get(run=run, kind="ConfigMap")
    assert result.diff == [{"path": "data.queues.yaml", "old": "present", "new": None}]
    assert not ManagedObject.objects.filter(cluster=cluster, kind="ConfigMap").exists()
    # The drift check afterwards leaves it alone: it is no longer the portal's.
    check = sync(cluster, SyncRun.Trigger.RECONCILE)
    assert "deleted" not in check.counts
    assert mig_sandbox.get_object("v1", "ConfigMap", "yunikorn-configs", "yunikorn")


def test_the_reconcile_also_releases_the_configmap_instead_of_deleting_it(demo, mig_sandbox):
    clusters, _admin = demo
    cluster = clusters["demo-mig"]
    sync(cluster)
    Cluster.objects.filter(pk=cluster.pk).update(yunikorn_enabled=False)
    ManagedObject.objects.filter(cluster=cluster, kind="ConfigMap").delete()  # no record left
    run = sync(cluster, SyncRun.Trigger.RECONCILE)
    assert run.counts.get("deleted") == 1, run.counts
    configmap = mig_sandbox.get_object("v1", "ConfigMap", "yunikorn-configs", "yunikorn")
    assert configmap is not None and "queues.yaml" not in (configmap.get("data") or {})


# --- item 11: a change sync costs what changed ----------------------------------------------


def test_a_change_sync_reads_writes_and_records_only_what_changed(demo, kube_sandbox):
    clusters, admin = demo
    cluster = clusters["demo"]
    first = sync(cluster)
    request = _change(
        admin, "demo", "team-c-dev", "nvidia.com/gpu", 3, 4, priority_classes=["experiment"]
    )
    kube_sandbox.stats.reset()
    run = sync(cluster)
    # Volcano queue team-c-dev (deserved 3) and the department-free root sums: only the queue.
    assert run.counts == {"unchanged": first.objects_total - 1, "updated": 1}, run.counts
    assert run.objects_total == first.objects_total
    rows = SyncObjectResult.objects.filter(run=run)
    assert [(r.kind, r.name, r.action) for r in rows] == [("Queue", "team-c-dev", "updated")]
    stats = kube_sandbox.stats.as_dict()
    # Discovery of the admission API (is MutatingAdmissionPolicy served?) and of the Volcano
    # API, a GET and an apply of the queue; no LIST of anything.
    assert stats["requests_total"] == 4, stats
    assert stats["writes"] == 1
    request.refresh_from_db()
    assert request.status == SyncRequest.Status.DONE


def test_a_hand_deleted_object_is_found_by_the_reconcile_not_by_a_change_sync(demo, kube_sandbox):
    clusters, admin = demo
    cluster = clusters["demo"]
    sync(cluster)
    kube = KubeClient.for_url(kube_sandbox.url)
    kube.delete("v1", "ResourceQuota", "team-a-training", "gpu-quota")
    kube.close()
    _change(admin, "demo", "team-c-dev", "nvidia.com/gpu", 3, 4, priority_classes=["experiment"])
    assert "drift_restored" not in sync(cluster).counts
    assert kube_sandbox.get_object("v1", "ResourceQuota", "gpu-quota", "team-a-training") is None
    check = sync(cluster, SyncRun.Trigger.RECONCILE)
    assert check.counts.get("drift_restored") == 1
    assert kube_sandbox.get_object("v1", "ResourceQuota", "gpu-quota", "team-a-training")


# --- item 10: a scheduler the API server does not serve ----------------------------------------


def test_a_cluster_without_kueue_v1beta2_gets_one_message_and_the_rest_is_written(
    kube_sandbox, client
):
    old_kueue = SandboxServer(port=0, omit_api_versions=("kueue.x-k8s.io/v1beta2",)).start()
    try:
        clusters, admin = _seed(kube_sandbox, old_kueue)
        cluster = clusters["demo-mig"]
        request = cluster_sync_request(cluster=cluster, acting_user=admin, reason="test")
        run = sync(cluster)
        assert run.status == SyncRun.Status.FAILED
        message = (
            "Kueue is enabled for cluster demo-mig but the API server does not serve "
            "kueue.x-k8s.io/v1beta2 (Kueue v0.15 or newer is needed)"
        )
        assert run.backend_problems == [
            {"backend": "Kueue", "api_version": KUEUE, "message": message}
        ]
        assert run.error == message
        # No raw 404 per Kueue object; the other objects were written.
        assert not SyncObjectResult.objects.filter(run=run, action="error").exists()
        assert old_kueue.get_object("v1", "ResourceQuota", "gpu-quota", "team-b-dev")
        assert old_kueue.get_object("v1", "ConfigMap", "yunikorn-configs", "yunikorn")
        request.refresh_from_db()
        assert request.status == SyncRequest.Status.FAILED
        # Shown on the cluster: the API and the overview page.
        client.force_login(admin)
        listed = client.get("/api/v1/clusters/").json()["results"]
        by_name = {c["name"]: c for c in listed}
        assert by_name["demo-mig"]["backend_problems"][0]["message"] == message
        assert by_name["demo"]["backend_problems"] == []
        page = client.get("/clusters/").content.decode()  # the cluster overview
        assert message in page
    finally:
        old_kueue.stop()


def test_a_cluster_without_volcano_says_so_before_writing(gpu, admin):
    server = SandboxServer(port=0, omit_api_versions=("scheduling.volcano.sh/v1beta1",)).start()
    try:
        cluster = Cluster.objects.create(name="plain", volcano_enabled=True, sandbox_url=server.url)
        ClusterCapacity.objects.create(cluster=cluster, resource=gpu, capacity=Decimal(8))
        team = Team.objects.create(slug="team-x", name="X")
        ns = TeamNamespace.objects.create(team=team, cluster=cluster, name="team-x-dev")
        allocation_set(team_namespace=ns, resource=gpu, guarantee=1, cap=2, acting_user=admin)
        server.stats.reset()
        run = sync(cluster)
        assert [p["backend"] for p in run.backend_problems] == ["Volcano"]
        assert "does not serve scheduling.volcano.sh/v1beta1" in run.error
        assert all(w["kind"] != "Queue" for w in server.stats.writes_in_order())
        assert server.get_object("v1", "ResourceQuota", "gpu-quota", "team-x-dev")
    finally:
        server.stop()


# --- item 9: preview of namespaces that do not exist yet -----------------------------------


def test_preview_of_a_new_namespace_shows_its_objects_as_created(demo, kube_sandbox):
    clusters, admin = demo
    cluster = clusters["demo"]
    sync(cluster)
    team = Team.objects.create(slug="team-d", name="Team D")
    ns = TeamNamespace.objects.create(team=team, cluster=cluster, name="team-d-dev")
    allocation_set(
        team_namespace=ns,
        resource=Resource.objects.get(name="nvidia.com/gpu"),
        guarantee=1,
        cap=2,
        acting_user=admin,
    )
    kube_sandbox.stats.reset()
    outcomes = cluster_preview(cluster_id=cluster.id)
    assert kube_sandbox.stats.writes == 0
    in_new = {(o.key[1], o.key[3]): o for o in outcomes if o.key[2] == "team-d-dev"}
    assert in_new, outcomes
    assert {o.action for o in in_new.values()} == {"created"}, [
        (o.key, o.action, o.error) for o in outcomes
    ]
    quota = in_new[("ResourceQuota", "gpu-quota")]
    assert {"path": "spec", "old": None, "new": {"hard": {GPU_QUOTA: "2"}}} in quota.diff
    assert kube_sandbox.get_object("v1", "Namespace", "team-d-dev") is None


def test_the_sandbox_refuses_a_dry_run_into_a_missing_namespace(kube_sandbox):
    kube = KubeClient.for_url(kube_sandbox.url)
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "q", "namespace": "nowhere"},
        "spec": {"hard": {"pods": "1"}},
    }
    with pytest.raises(Exception) as refused:
        kube.apply(quota, field_manager="x", dry_run=True)
    kube.close()
    assert getattr(refused.value, "status", None) == 404


# --- item 5: a department shrinks with its teams ---------------------------------------------


def test_a_department_shrinks_with_its_teams_children_first(kube_sandbox, gpu, admin):
    cluster = Cluster.objects.create(
        name="depts", volcano_enabled=True, sandbox_url=kube_sandbox.url
    )
    ClusterCapacity.objects.create(cluster=cluster, resource=gpu, capacity=Decimal(100))
    dept = Team.objects.create(slug="research", name="Research")
    namespaces = []
    for slug in ("team-p", "team-q"):
        team = Team.objects.create(slug=slug, name=slug, parent=dept)
        ns = TeamNamespace.objects.create(team=team, cluster=cluster, name=f"{slug}-train")
        allocation_set(team_namespace=ns, resource=gpu, guarantee=6, cap=10, acting_user=admin)
        namespaces.append(ns)
    assert sync(cluster).status == SyncRun.Status.SUCCEEDED
    for ns in namespaces:
        allocation_set(team_namespace=ns, resource=gpu, guarantee=2, cap=4, acting_user=admin)
    cluster_sync_request(cluster=cluster, acting_user=admin, reason="shrink")
    kube_sandbox.stats.reset()
    run = sync(cluster)
    assert run.status == SyncRun.Status.SUCCEEDED, run.error
    queues = [w["name"] for w in kube_sandbox.stats.writes_in_order() if w.get("kind") == "Queue"]
    assert queues.index("research") > queues.index("team-p-train")
    assert queues.index("research") > queues.index("team-q-train")
    research = kube_sandbox.get_object(VOLCANO, "Queue", "research")
    assert research["spec"]["deserved"]["nvidia.com/gpu"] == "4"
