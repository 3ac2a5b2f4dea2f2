"""A sync after a change plans only what the change touched: over generated worlds (sizes,
schedulers, department hierarchies, shadow namespaces, temporary grants), the plan of the
touched namespaces renders exactly what the whole plan renders for them and for the
cluster-wide objects they feed, and a sync of it leaves the cluster as a full sync would;
concurrent approvals, failed runs and requests done by another run lose no change."""

import random
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import transaction

from approvals.grants import requests_expire_due
from approvals.lifecycle import request_approve, request_submit
from kubesandbox import SandboxServer
from quotas.kube.objects import ObjectKey
from quotas.kube.plan import cluster_plan
from quotas.kube.render import render_cluster
from quotas.kube.sync import (
    CLUSTER_WIDE_KINDS,
    TransientSyncError,
    changed_namespaces,
    cluster_sync,
)
from quotas.models import (
    Allocation,
    Cluster,
    ClusterCapacity,
    PriorityClass,
    Resource,
    SyncRequest,
    SyncRun,
    Team,
    TeamNamespace,
)
from quotas.services import allocation_set, cluster_sync_request
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db

# Backends of the generated worlds: Kueue and YuniKorn clusters are always planned whole, the
# others by what changed.
BACKENDS = [
    (),
    ("volcano",),
    ("volcano",),
    ("volcano", "kueue"),
    ("yunikorn",),
    ("volcano", "kueue", "yunikorn"),
]
RESOURCES = [
    ("nvidia.com/gpu", Resource.Kind.GPU, "", "A100 80GB"),
    ("nvidia.com/mig-1g.10gb", Resource.Kind.MIG, "", "A100 80GB"),
    ("nvidia.com/gpumem", Resource.Kind.VGPU_MEMORY, "", ""),
    ("cpu", Resource.Kind.CPU, "", ""),
    ("memory", Resource.Kind.MEMORY, "Gi", ""),
]


def _resources() -> list[Resource]:
    rows = []
    for name, kind, suffix, model in RESOURCES:
        row, _ = Resource.objects.get_or_create(
            name=name,
            defaults={
                "display_name": name,
                "kind": kind,
                "quantity_suffix": suffix,
                "gpu_model": model,
            },
        )
        rows.append(row)
    for name, value in (("high", 1000), ("low", 10)):
        PriorityClass.objects.get_or_create(name=name, defaults={"value": value})
    return rows


def _set_random(rng: random.Random, ns: TeamNamespace, resource: Resource) -> None:
    guarantee = rng.randint(0, 4)
    cap = guarantee + rng.randint(0, 4)
    per_pod = rng.choice([None, None, cap or None, max(guarantee, 1) if cap else None])
    classes = rng.choice([(), (), ("high",), ("high", "low")])
    allocation_set(
        team_namespace=ns,
        resource=resource,
        guarantee=guarantee,
        cap=cap,
        per_pod_max=per_pod,
        priority_classes=classes,
        acting_user=None,
    )


def make_world(seed: int, url: str = "") -> Cluster:
    """A cluster of teams under up to three levels of departments, each team with one or two
    namespaces, most with allocations of random resources; a few in shadow mode."""
    rng = random.Random(seed)
    resources = _resources()
    backends = BACKENDS[seed % len(BACKENDS)]
    cluster = Cluster.objects.create(
        name=f"w{seed}",
        sandbox_url=url,
        volcano_enabled="volcano" in backends,
        kueue_enabled="kueue" in backends,
        yunikorn_enabled="yunikorn" in backends,
    )
    for resource in resources:
        ClusterCapacity.objects.create(
            cluster=cluster, resource=resource, capacity=Decimal(rng.randint(8, 200))
        )
    departments: list[Team | None] = [None]
    for d in range(rng.randint(0, 4)):
        parent = rng.choice(departments)
        departments.append(
            Team.objects.create(slug=f"w{seed}-dept{d}", name=f"Dept {d}", parent=parent)
        )
    for t in range(rng.randint(3, 6 + seed % 25)):
        team = Team.objects.create(
            slug=f"w{seed}-team{t}", name=f"Team {t}", parent=rng.choice(departments)
        )
        for i in range(rng.randint(1, 2)):
            ns = TeamNamespace.objects.create(
                team=team,
                cluster=cluster,
                name=f"w{seed}-team{t}-{i}",
                workload_class=rng.choice(list(TeamNamespace.WorkloadClass)),
                shadow=rng.random() < 0.08,
            )
            if rng.random() < 0.85:
                for resource in rng.sample(resources, rng.randint(1, 3)):
                    _set_random(rng, ns, resource)
    return Cluster.objects.get(pk=cluster.pk)


def change_world(seed: int, cluster: Cluster) -> set[str]:
    """Change the allocations of one to three namespaces; returns their names."""
    rng = random.Random(seed * 7919 + 1)
    resources = list(Resource.objects.order_by("name"))
    namespaces = list(TeamNamespace.objects.filter(cluster=cluster).order_by("name"))
    touched = rng.sample(namespaces, min(len(namespaces), rng.randint(1, 3)))
    for ns in touched:
        for resource in rng.sample(resources, rng.randint(1, 2)):
            _set_random(rng, ns, resource)
    return {ns.name for ns in touched}


def in_scope(key: ObjectKey, names: set[str], departments: set[str]) -> bool:
    """Whether a plan of the namespaces `names` (below `departments`) renders the object."""
    if key.namespace:
        return key.namespace in names
    if key.kind in CLUSTER_WIDE_KINDS:
        return True
    if key.kind in ("Namespace", "Queue") and key.name in names:
        return True
    return key.kind == "Queue" and key.name in departments


def _changed_request(cluster: Cluster, names: set[str]) -> None:
    cluster_sync_request(cluster=cluster, acting_user=None, reason="test", namespaces=names)


@pytest.mark.parametrize("seed", range(36))
def test_a_plan_of_the_touched_namespaces_renders_what_the_whole_plan_renders(seed):
    cluster = make_world(seed)
    touched = change_world(seed, cluster)
    whole = {ObjectKey.of(o): o for o in render_cluster(cluster_plan(cluster))}
    if {"kueue", "yunikorn"} & set(cluster.backends):
        # Rendered from every namespace: a plan of some refuses to render them.
        with pytest.raises(ValueError, match="plan of every namespace"):
            render_cluster(cluster_plan(cluster, namespaces=touched))
        return
    plan = cluster_plan(cluster, namespaces=touched)
    names = {ns.name for ns in plan.namespaces}
    shadow = set(
        TeamNamespace.objects.filter(cluster=cluster, shadow=True).values_list("name", flat=True)
    )
    assert names == touched | shadow
    departments = {d for ns in plan.namespaces for d in ns.team.ancestors}
    part = {ObjectKey.of(o): o for o in render_cluster(plan)}
    expected = {k: o for k, o in whole.items() if in_scope(k, names, departments)}
    assert part == expected
    # Not the whole cluster again in disguise.
    if len(names) < TeamNamespace.objects.filter(cluster=cluster).count():
        assert len(part) < len(whole)


def _cluster_state(server: SandboxServer, cluster: Cluster) -> dict:
    """What the sandbox holds of the portal's objects for the cluster (their owned fields)."""
    from quotas.kube.client import KubeClient
    from quotas.kube.diff import owned
    from quotas.kube.sync import ClusterSyncer

    client = KubeClient.for_url(server.url)
    try:
        plan = cluster_plan(cluster)
        syncer = ClusterSyncer(plan=plan, mode=cluster.sync_mode, client=client, managed={})
        live = syncer.live_objects(set())
    finally:
        client.close()
    state = {}
    for key, obj in live.items():
        view = owned(obj)
        view.get("annotations", {}).pop("quota-portal/generation", None)
        view.pop("status", None)
        state[key] = view
    return state


# Worlds a full sync writes (Volcano's webhook refuses some random hierarchies of others,
# the whole plan's sync as much as a partial one), core, Volcano and Volcano with Kueue.
@pytest.mark.parametrize("seed", [0, 1, 6, 7, 8, 9, 12, 13, 15, 27, 30, 31])
def test_a_partial_sync_leaves_the_cluster_as_a_full_sync_would(seed):
    with (
        SandboxServer(host="127.0.0.1", port=0) as server,
        SandboxServer(host="127.0.0.1", port=0) as other,
    ):
        cluster = make_world(seed, server.url)
        assert cluster_sync(cluster_id=cluster.pk).status == SyncRun.Status.SUCCEEDED
        with transaction.atomic():
            touched = change_world(seed, cluster)
            _changed_request(cluster, touched)
        run = cluster_sync(cluster_id=cluster.pk, trigger=SyncRun.Trigger.CHANGE)
        assert run.status == SyncRun.Status.SUCCEEDED, run.error
        assert not SyncRequest.objects.filter(cluster=cluster).exclude(status="done").exists()
        whole = render_cluster(cluster_plan(cluster))
        if changed_namespaces(cluster, SyncRun.Trigger.CHANGE, [sorted(touched)]) is not None:
            assert run.objects_total < len(whole)  # it planned less than the whole cluster
        # The same world synced whole, at once, to another API server.
        Cluster.objects.filter(pk=cluster.pk).update(sandbox_url=other.url)
        fresh = Cluster.objects.get(pk=cluster.pk)
        assert _cluster_state(server, fresh) == _fresh_full_state(fresh, other)
        # And the drift check, which compares everything, finds nothing left to do.
        Cluster.objects.filter(pk=cluster.pk).update(sandbox_url=server.url)
        check = cluster_sync(cluster_id=cluster.pk, trigger=SyncRun.Trigger.RECONCILE)
        # (Shadow namespaces are compared and reported, never written.)
        assert set(check.counts) <= {"unchanged", "shadow"}, check.counts


def _fresh_full_state(cluster: Cluster, server: SandboxServer) -> dict:
    from quotas.kube.client import KubeClient
    from quotas.kube.sync import ClusterSyncer

    client = KubeClient.for_url(server.url)
    try:
        ClusterSyncer(
            plan=cluster_plan(cluster), mode=cluster.sync_mode, client=client, managed={}
        ).run()
    finally:
        client.close()
    return _cluster_state(server, cluster)


# --- what identifies the change, and the cases where it cannot be bounded ------------------


def test_only_changes_that_name_their_namespaces_are_planned_partly(cluster):
    change = SyncRun.Trigger.CHANGE
    assert changed_namespaces(cluster, change, [["a"], ["b", "c"]]) == {"a", "b", "c"}
    assert changed_namespaces(cluster, change, [["a"], None]) is None  # e.g. a capacity
    assert changed_namespaces(cluster, change, []) is None  # nothing pending: compare all
    assert changed_namespaces(cluster, SyncRun.Trigger.RECONCILE, [["a"]]) is None
    cluster.sync_mode = Cluster.SyncMode.SHADOW
    assert changed_namespaces(cluster, change, [["a"]]) is None
    cluster.sync_mode = Cluster.SyncMode.ENFORCE
    cluster.kueue_enabled = True
    assert changed_namespaces(cluster, change, [["a"]]) is None


def _world_on(server: SandboxServer, seed: int = 8) -> Cluster:
    cluster = make_world(seed, server.url)
    assert cluster.backends == ["core", "volcano"]
    assert cluster_sync(cluster_id=cluster.pk).status == SyncRun.Status.SUCCEEDED
    return cluster


def _quota_cap(server: SandboxServer, namespace: str) -> str:
    quota = server.get_object("v1", "ResourceQuota", "gpu-quota", namespace)
    return quota["spec"]["hard"]["requests.nvidia.com/gpu"]


def _approve_cap(cluster: Cluster, namespace: str, cap: int) -> None:
    """An approval's writes: the allocation and its sync request naming the namespace."""
    ns = TeamNamespace.objects.get(cluster=cluster, name=namespace)
    gpu = Resource.objects.get(name="nvidia.com/gpu")
    with transaction.atomic():
        allocation_set(team_namespace=ns, resource=gpu, guarantee=1, cap=cap, acting_user=None)
        _changed_request(cluster, {namespace})


def _two_namespaces(cluster: Cluster) -> list[str]:
    names = TeamNamespace.objects.filter(cluster=cluster, shadow=False).order_by("name")
    return list(names.values_list("name", flat=True)[:2])


def test_two_approvals_before_one_sync_both_reach_the_cluster():
    with SandboxServer(host="127.0.0.1", port=0) as server:
        cluster = _world_on(server)
        a, b = _two_namespaces(cluster)
        _approve_cap(cluster, a, 7)
        _approve_cap(cluster, b, 8)
        run = cluster_sync(cluster_id=cluster.pk)
        assert run.status == SyncRun.Status.SUCCEEDED, run.error
        assert (_quota_cap(server, a), _quota_cap(server, b)) == ("7", "8")
        assert set(run.requests.values_list("status", flat=True)) == {"done"}
        # The second task finds its request done by the first run: nothing is left to write.
        again = cluster_sync(cluster_id=cluster.pk)
        assert again.counts.get("updated", 0) == again.counts.get("created", 0) == 0


def test_a_failed_run_leaves_its_change_to_the_next_partial_sync():
    with SandboxServer(host="127.0.0.1", port=0) as server:
        cluster = _world_on(server)
        a, b = _two_namespaces(cluster)
        _approve_cap(cluster, a, 7)
        server.faults.add("status", status=500, methods={"PATCH"}, path_contains=a)
        with pytest.raises(TransientSyncError):
            cluster_sync(cluster_id=cluster.pk)
        failed = SyncRun.objects.filter(cluster=cluster).latest("started_at")
        assert failed.status == SyncRun.Status.FAILED
        assert SyncRequest.objects.filter(cluster=cluster, status="failed").count() == 1
        server.faults.clear()
        # The retry, or the next approval's sync, plans the failed change's namespace too.
        _approve_cap(cluster, b, 8)
        run = cluster_sync(cluster_id=cluster.pk)
        assert run.status == SyncRun.Status.SUCCEEDED, run.error
        assert (_quota_cap(server, a), _quota_cap(server, b)) == ("7", "8")
        assert not SyncRequest.objects.filter(cluster=cluster).exclude(status="done").exists()


def test_a_change_without_named_namespaces_plans_the_whole_cluster():
    with SandboxServer(host="127.0.0.1", port=0) as server:
        cluster = _world_on(server)
        a, b = _two_namespaces(cluster)
        gpu = Resource.objects.get(name="nvidia.com/gpu")
        with transaction.atomic():
            # A change recorded for the whole cluster (as a capacity or a team move is) ...
            allocation_set(
                team_namespace=TeamNamespace.objects.get(cluster=cluster, name=a),
                resource=gpu,
                guarantee=1,
                cap=5,
                acting_user=None,
            )
            cluster_sync_request(cluster=cluster, acting_user=None, reason="whole")
        _approve_cap(cluster, b, 8)  # ... and an approval naming only its own namespace
        run = cluster_sync(cluster_id=cluster.pk)
        assert run.status == SyncRun.Status.SUCCEEDED, run.error
        assert (_quota_cap(server, a), _quota_cap(server, b)) == ("5", "8")
        assert run.objects_total == len(render_cluster(cluster_plan(cluster)))


def test_a_temporary_grant_and_its_end_sync_their_namespace(
    plan, lead_c, gpu, admin, strict_policy, kube_sandbox, django_capture_on_commit_callbacks
):
    cluster = plan["team-c"].cluster
    Cluster.objects.filter(pk=cluster.pk).update(sandbox_url=kube_sandbox.url)

    def sync() -> SyncRun:
        # On commit the run tells the requests it applied (the grant becomes active).
        with django_capture_on_commit_callbacks(execute=True):
            run = cluster_sync(cluster_id=cluster.pk)
        assert run.status == SyncRun.Status.SUCCEEDED, run.error
        return run

    def cap() -> str:
        quota = kube_sandbox.get_object("v1", "ResourceQuota", "gpu-quota", "team-c-dev")
        return quota["spec"]["hard"]["requests.nvidia.com/gpu"]

    sync()
    whole = len(render_cluster(cluster_plan(cluster)))
    request = new_request(
        lead_c, plan["team-c"], gpu, 4, 6, kind="temporary", ends_in=timedelta(hours=3)
    )
    with django_capture_on_commit_callbacks(execute=False):  # the worker's task: sync() here
        request_submit(request=request, acting_user=lead_c)
        request_approve(request=request, acting_user=admin)
    assert SyncRequest.objects.filter(cluster=cluster).latest("id").namespaces == ["team-c-dev"]
    assert sync().objects_total < whole
    assert cap() == "6"
    with django_capture_on_commit_callbacks(execute=False):
        assert requests_expire_due(now=request.ends_at + timedelta(minutes=1)) == [request.pk]
    assert SyncRequest.objects.filter(cluster=cluster).latest("id").namespaces == ["team-c-dev"]
    assert sync().objects_total < whole
    assert cap() == "4"
    assert Allocation.objects.get(team_namespace=plan["team-c"]).cap == 4
    check = cluster_sync(cluster_id=cluster.pk, trigger=SyncRun.Trigger.RECONCILE)
    assert set(check.counts) <= {"unchanged"}, check.counts
