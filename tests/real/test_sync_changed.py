"""On the real control plane: an approval touching one namespace of many syncs exactly that
namespace's changed objects and the department queue it feeds (Volcano's webhook checking
the hierarchy), and the drift check afterwards finds nothing left to write."""

from __future__ import annotations

import json

import pytest

from approvals.lifecycle import request_approve, request_submit
from quotas.models import SyncRequest, SyncRun, Team, TeamNamespace
from quotas.services import allocation_set
from tests.support.real import sync_now
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db


def _queue(real_cluster, name: str) -> dict:
    return json.loads(
        real_cluster.kubectl("get", "queues.scheduling.volcano.sh", name, "-o", "json").stdout
    )


def test_an_approval_syncs_its_namespace_and_its_department_queue_only(
    plan, lead_c, gpu, admin, strict_policy, real_cluster, on_real_cluster
):
    research = Team.objects.create(slug="research", name="Research")
    Team.objects.filter(slug__in=["team-a", "team-c"]).update(parent=research)
    for i in range(7):
        team = Team.objects.create(
            slug=f"team-x{i}", name=f"Team X{i}", parent=research if i % 2 else None
        )
        ns = TeamNamespace.objects.create(
            team=team, cluster=plan["team-c"].cluster, name=f"team-x{i}-dev"
        )
        if i < 4:
            allocation_set(team_namespace=ns, resource=gpu, guarantee=1, cap=2, acting_user=admin)
    cluster = on_real_cluster(plan["team-c"].cluster)
    first = sync_now(cluster)
    assert first.status == SyncRun.Status.SUCCEEDED, (first.error, first.backend_problems)
    assert _queue(real_cluster, "research")["spec"]["capability"]["nvidia.com/gpu"] == "18"

    request = new_request(lead_c, plan["team-c"], gpu, 2, 5)
    request_submit(request=request, acting_user=lead_c)
    request_approve(request=request, acting_user=admin)
    assert SyncRequest.objects.filter(cluster=cluster).latest("id").namespaces == ["team-c-dev"]

    run = sync_now(cluster, trigger=SyncRun.Trigger.CHANGE)
    assert run.status == SyncRun.Status.SUCCEEDED, run.error
    written = {(r.kind, r.namespace, r.name): r.action for r in run.results.all()}
    assert written == {
        ("ResourceQuota", "team-c-dev", "gpu-quota"): "updated",
        ("Queue", "", "team-c-dev"): "updated",
        ("Queue", "", "research"): "updated",
    }
    assert run.objects_total < first.objects_total
    quota = json.loads(
        real_cluster.kubectl(
            "get", "resourcequota", "gpu-quota", "-n", "team-c-dev", "-o", "json"
        ).stdout
    )
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "5"
    assert _queue(real_cluster, "team-c-dev")["spec"]["capability"]["nvidia.com/gpu"] == "5"
    assert _queue(real_cluster, "research")["spec"]["capability"]["nvidia.com/gpu"] == "19"
    other = json.loads(
        real_cluster.kubectl(
            "get", "resourcequota", "gpu-quota", "-n", "team-a-training", "-o", "json"
        ).stdout
    )
    assert other["spec"]["hard"]["requests.nvidia.com/gpu"] == "10"

    check = sync_now(cluster)  # the drift check compares everything
    assert check.status == SyncRun.Status.SUCCEEDED, check.error
    assert set(check.counts) <= {"unchanged"}, check.counts
