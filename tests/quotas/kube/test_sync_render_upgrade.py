"""Upgrading a cluster the portal managed before: what older versions wrote and no longer
render is replaced on the next sync (the per-pod max LimitRange by the admission policy)."""

import pytest
from django.core.management import call_command

from kubesandbox import SandboxServer
from quotas.kube.client import KubeClient
from quotas.kube.sync import cluster_sync
from quotas.models import Cluster, ManagedObject, SyncRun

pytestmark = pytest.mark.django_db

OLD_LIMIT_RANGE = {
    "apiVersion": "v1",
    "kind": "LimitRange",
    "metadata": {
        "name": "gpu-limits",
        "namespace": "team-a-training",
        "labels": {
            "app.kubernetes.io/managed-by": "gpu-quota-portal",
            "quota-portal/cluster": "demo",
            "quota-portal/team": "team-a",
        },
    },
    "spec": {"limits": [{"type": "Pod", "max": {"nvidia.com/gpu": "8"}}]},
}


@pytest.mark.parametrize(
    ("recorded", "trigger"),
    [
        # The older portal recorded what it wrote: the next sync of a change prunes it.
        (True, SyncRun.Trigger.CHANGE),
        # No record (a restored database, say): the periodic full comparison finds it by label.
        (False, SyncRun.Trigger.RECONCILE),
    ],
)
def test_old_per_pod_limit_range_is_pruned_and_the_policy_written(
    kube_sandbox: SandboxServer, recorded: bool, trigger: str
):
    call_command("seed_demo", verbosity=0)
    Cluster.objects.filter(name="demo").update(sandbox_url=kube_sandbox.url)
    demo = Cluster.objects.get(name="demo")
    kube = KubeClient.for_url(kube_sandbox.url)
    try:
        kube.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a-training"}}
        )
        kube.create(OLD_LIMIT_RANGE)
        if recorded:
            ManagedObject.objects.create(
                cluster=demo,
                api_version="v1",
                kind="LimitRange",
                namespace="team-a-training",
                name="gpu-limits",
                applied={"spec": OLD_LIMIT_RANGE["spec"]},
            )
        run = cluster_sync(cluster_id=demo.id, trigger=trigger)
        assert run.status == SyncRun.Status.SUCCEEDED, run.error
        assert kube_sandbox.get_object("v1", "LimitRange", "gpu-limits", "team-a-training") is None
        api = "admissionregistration.k8s.io/v1"
        policy = kube_sandbox.get_object(
            api, "ValidatingAdmissionPolicy", "quota-portal-per-pod-max"
        )
        binding = kube_sandbox.get_object(
            api, "ValidatingAdmissionPolicyBinding", "quota-portal-per-pod-max"
        )
        assert policy is not None and binding is not None
        assert binding["spec"]["policyName"] == "quota-portal-per-pod-max"
        namespace = kube_sandbox.get_object("v1", "Namespace", "team-a-training")
        annotations = namespace["metadata"]["annotations"]
        assert annotations["quota-portal/per-pod-max.nvidia.com_gpu"] == "8"
        assert annotations["scheduling.volcano.sh/queue-name"] == "team-a-training"
    finally:
        kube.close()
