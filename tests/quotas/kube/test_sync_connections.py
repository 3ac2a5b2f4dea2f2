"""How the portal reaches a cluster: kubeconfig + context with a token; secrets never leak."""

import pytest

from kubesandbox import SandboxServer
from quotas.kube.sync import cluster_sync
from quotas.models import Cluster, SyncRun

pytestmark = pytest.mark.django_db

TOKEN = "s3cr3t-cluster-token-value"


@pytest.fixture
def token_sandbox():
    server = SandboxServer(host="127.0.0.1", port=0, token=TOKEN).start()
    yield server
    server.stop()


def test_sync_through_a_kubeconfig_with_a_bearer_token(token_sandbox, tmp_path, alloc_a):
    kubeconfig = token_sandbox.write_kubeconfig(tmp_path / "config", context="prod")
    Cluster.objects.filter(pk=alloc_a.team_namespace.cluster_id).update(
        connection="kubeconfig", kubeconfig_path=str(kubeconfig), kubeconfig_context="prod"
    )
    run = cluster_sync(cluster_id=alloc_a.team_namespace.cluster_id)
    assert run.status == SyncRun.Status.SUCCEEDED, run.error
    quota = token_sandbox.get_object("v1", "ResourceQuota", "gpu-quota", "team-a-training")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "10"


def test_a_refused_token_fails_the_sync_without_showing_the_token(
    token_sandbox, tmp_path, alloc_a, caplog
):
    kubeconfig = token_sandbox.write_kubeconfig(tmp_path / "config")
    kubeconfig.write_text(kubeconfig.read_text().replace(TOKEN, "wrong-token-also-secret"))
    Cluster.objects.filter(pk=alloc_a.team_namespace.cluster_id).update(
        connection="kubeconfig", kubeconfig_path=str(kubeconfig)
    )
    run = cluster_sync(cluster_id=alloc_a.team_namespace.cluster_id)
    assert run.status == SyncRun.Status.FAILED
    assert "401" in run.error
    for text in (run.error, caplog.text):
        assert TOKEN not in text and "wrong-token-also-secret" not in text
    assert token_sandbox.stats.writes == 0


def test_a_missing_kubeconfig_fails_the_run_visibly(alloc_a, admin):
    from quotas.models import SyncRequest
    from quotas.services import cluster_sync_request

    cluster = alloc_a.team_namespace.cluster
    Cluster.objects.filter(pk=cluster.pk).update(
        connection="kubeconfig", kubeconfig_path="/nonexistent/kubeconfig"
    )
    request = cluster_sync_request(cluster=cluster, acting_user=admin, reason="x")
    run = cluster_sync(cluster_id=cluster.pk)
    assert run.status == SyncRun.Status.FAILED
    assert run.error == "kubeconfig /nonexistent/kubeconfig of cluster demo not found"
    request.refresh_from_db()
    assert request.status == SyncRequest.Status.FAILED


def test_an_unknown_context_fails_the_run_naming_it(kube_sandbox, tmp_path, alloc_a):
    kubeconfig = kube_sandbox.write_kubeconfig(tmp_path / "config", context="prod")
    Cluster.objects.filter(pk=alloc_a.team_namespace.cluster_id).update(
        connection="kubeconfig", kubeconfig_path=str(kubeconfig), kubeconfig_context="staging"
    )
    run = cluster_sync(cluster_id=alloc_a.team_namespace.cluster_id)
    assert run.status == SyncRun.Status.FAILED
    assert "staging" in run.error
