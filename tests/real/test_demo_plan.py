"""The demo plan on the real control plane: applied by server-side apply, a re-sync writes
nothing, drift is restored, and fields another manager owns survive (real managedFields)."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from quotas.models import Cluster, SyncRun
from tests.support.real import sync_now

pytestmark = pytest.mark.django_db


def written(run: SyncRun) -> dict[str, int]:
    return {k: v for k, v in run.counts.items() if k not in ("unchanged",) and v}


@pytest.mark.parametrize("cluster_name", ["demo", "demo-mig"])
def test_the_demo_plan_applies_and_a_resync_writes_nothing(
    cluster_name, real_cluster, on_real_cluster
):
    call_command("seed_demo")
    cluster = on_real_cluster(Cluster.objects.get(name=cluster_name))
    if cluster.yunikorn_enabled:
        # YuniKorn's own namespace exists where it is installed; the portal never creates it.
        real_cluster.kubectl("create", "namespace", cluster.yunikorn_namespace)

    first = sync_now(cluster)
    assert first.status == SyncRun.Status.SUCCEEDED, (first.error, first.backend_problems)
    assert first.counts.get("created", 0) > 0 and not first.counts.get("error")

    again = sync_now(cluster)
    assert again.status == SyncRun.Status.SUCCEEDED, again.error
    assert written(again) == {}, again.counts

    quotas = json.loads(
        real_cluster.kubectl(
            "get", "resourcequotas", "-n", "team-c-dev", "-o", "json", "--show-managed-fields"
        ).stdout
    )["items"]
    ours = [q for q in quotas if q["metadata"]["labels"].get("app.kubernetes.io/managed-by")]
    assert ours, quotas
    # The API server itself records the portal as the one manager that applied them.
    for quota in ours:
        appliers = {
            m["manager"] for m in quota["metadata"]["managedFields"] if m["operation"] == "Apply"
        }
        assert appliers == {"gpu-quota-portal"}, quota["metadata"]["managedFields"]


def test_drift_is_restored_and_fields_of_other_managers_survive(real_cluster, on_real_cluster):
    call_command("seed_demo")
    cluster = on_real_cluster(Cluster.objects.get(name="demo"))
    assert sync_now(cluster).status == SyncRun.Status.SUCCEEDED

    quota = real_cluster.get_json("resourcequota", "gpu-quota", "team-a-training")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "10"
    # An operator raises the portal's cap by hand (drift) and adds a pods limit of their own.
    real_cluster.kubectl(
        "patch",
        "resourcequota",
        "gpu-quota",
        "-n",
        "team-a-training",
        "--type=merge",
        "--field-manager=operator",
        "-p",
        json.dumps({"spec": {"hard": {"requests.nvidia.com/gpu": "99", "pods": "50"}}}),
    )

    run = sync_now(cluster)
    assert run.status == SyncRun.Status.SUCCEEDED, run.error
    assert run.counts.get("drift_restored", 0) + run.counts.get("updated", 0) >= 1, run.counts
    hard = real_cluster.get_json("resourcequota", "gpu-quota", "team-a-training")["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu"] == "10"
    assert hard["pods"] == "50"
