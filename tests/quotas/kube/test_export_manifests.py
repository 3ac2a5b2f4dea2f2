"""export_manifests on the demo data: YAML documents, namespaces first, strictly valid objects."""

import os
import subprocess
from io import StringIO
from pathlib import Path

import pytest
import yaml
from django.core.management import CommandError, call_command

from kubesandbox import SandboxServer
from kubesandbox.schemas import validate_object
from quotas.kube.render import MANAGED_BY_LABEL
from tests.support.kube import kubectl_binary

pytestmark = pytest.mark.django_db

KUEUE_KINDS = {"ClusterQueue", "LocalQueue", "ResourceFlavor", "Cohort"}


@pytest.fixture
def demo():
    call_command("seed_demo", verbosity=0, stdout=StringIO())


def export(*args: str) -> str:
    out = StringIO()
    call_command("export_manifests", *args, stdout=out)
    return out.getvalue()


def documents(text: str) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(text) if doc is not None]


def test_every_document_validates_strictly_and_namespaces_come_first(demo):
    text = export()
    docs = documents(text)
    assert len(docs) > 10
    for doc in docs:
        assert validate_object(doc) == [], doc
        assert doc["metadata"]["labels"][MANAGED_BY_LABEL] == "gpu-quota-portal"
        assert list(doc)[:3] == ["apiVersion", "kind", "metadata"]
    # Per cluster: every Namespace before any other object.
    for chunk in text.split("# cluster: ")[1:]:
        kinds = [d["kind"] for d in documents(chunk.split("\n", 1)[1])]
        first_other = next(i for i, k in enumerate(kinds) if k != "Namespace")
        assert "Namespace" not in kinds[first_other:]
        assert kinds[0] == "Namespace"


def test_all_clusters_are_exported_each_under_its_comment(demo):
    text = export()
    assert text.startswith("# cluster: demo\n")
    assert "\n# cluster: demo-mig\n" in text
    names = {d["metadata"]["name"] for d in documents(text) if d["kind"] == "Namespace"}
    assert {"team-a-training", "team-b-inference", "team-c-dev", "team-a-inference"} <= names


def test_demo_cluster_has_volcano_queues_and_no_kueue_objects(demo):
    text = export("--cluster", "demo")
    assert "# cluster: demo-mig" not in text
    docs = documents(text)
    queues = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Queue"}
    assert set(queues) == {"team-a-training", "team-b-inference", "team-c-dev"}
    assert queues["team-a-training"]["spec"]["capability"] == {"nvidia.com/gpu": "10"}
    assert queues["team-a-training"]["spec"]["deserved"] == {"nvidia.com/gpu": "6"}
    assert not [d for d in docs if d["kind"] in KUEUE_KINDS]
    assert not [d for d in docs if d["kind"] == "ConfigMap"]
    quota = next(
        d
        for d in docs
        if d["kind"] == "ResourceQuota"
        and d["metadata"] == d["metadata"] | {"name": "gpu-quota", "namespace": "team-a-training"}
    )
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "10"}


def test_demo_mig_cluster_has_kueue_queues_and_the_yunikorn_configmap(demo):
    docs = documents(export("--cluster", "demo-mig"))
    kinds = {d["kind"] for d in docs}
    assert "Queue" not in kinds
    cluster_queues = {d["metadata"]["name"] for d in docs if d["kind"] == "ClusterQueue"}
    assert cluster_queues == {"team-a-inference", "team-b-dev", "team-c-dev"}
    local_queues = {
        (d["metadata"]["namespace"], d["spec"]["clusterQueue"])
        for d in docs
        if d["kind"] == "LocalQueue"
    }
    assert local_queues == {(n, n) for n in cluster_queues}
    configmaps = [d for d in docs if d["kind"] == "ConfigMap"]
    assert [c["metadata"]["name"] for c in configmaps] == ["yunikorn-configs"]
    queues_yaml = yaml.safe_load(configmaps[0]["data"]["queues.yaml"])
    leaves = {q["name"]: q for q in queues_yaml["partitions"][0]["queues"][0]["queues"]}
    assert leaves["team-b-dev"]["resources"] == {
        "guaranteed": {"nvidia.com/mig-1g.10gb": "4"},
        "max": {"nvidia.com/mig-1g.10gb": "6"},
    }


def test_unknown_cluster_is_an_error_naming_it(demo):
    with pytest.raises(CommandError, match="no-such-cluster"):
        export("--cluster", "no-such-cluster")


def test_no_clusters_prints_nothing():
    assert export() == ""


def test_demo_mig_kueue_covers_cpu_memory_and_lends_unguaranteed_slices(demo):
    """The demo sets demo-mig's Kueue pools (256 cores, 2048 GiB); the root Cohort holds what
    the ClusterQueues' shares of them leave (team-a 1/4, team-b 4/14, team-c 2/14 of the
    pools: in proportion to their largest guarantee) and the MIG slices nobody is guaranteed
    (14 - 6, 4 - 1)."""
    docs = documents(export("--cluster", "demo-mig"))
    (root,) = [d for d in docs if d["kind"] == "Cohort" and d["metadata"]["name"] == "portal"]
    own = {
        (flavor["name"], r["name"]): r["nominalQuota"]
        for group in root["spec"]["resourceGroups"]
        for flavor in group["flavors"]
        for r in flavor["resources"]
    }
    assert own == {
        ("a100-80gb", "nvidia.com/mig-1g.10gb"): "8",
        ("a100-80gb", "nvidia.com/mig-3g.40gb"): "3",
        ("default-flavor", "cpu"): "82287m",  # 256 - 64 - 73.142 - 36.571
        ("default-flavor", "memory"): "674085Mi",
    }
    for cq in (d for d in docs if d["kind"] == "ClusterQueue"):
        covered = {r for g in cq["spec"]["resourceGroups"] for r in g["coveredResources"]}
        assert {"cpu", "memory"} <= covered
    flavors = {d["metadata"]["name"] for d in docs if d["kind"] == "ResourceFlavor"}
    assert flavors == {"a100-80gb", "default-flavor"}
    configmap = next(d for d in docs if d["kind"] == "ConfigMap")
    rules = yaml.safe_load(configmap["data"]["queues.yaml"])["partitions"][0]["placementrules"]
    assert rules[-1] == {"name": "fixed", "value": "root.default", "create": False}


def test_demo_per_pod_max_is_an_admission_policy_and_namespaces_name_their_queues(demo):
    docs = documents(export("--cluster", "demo"))
    assert not [d for d in docs if d["kind"] == "LimitRange"]
    kinds = [d["kind"] for d in docs]
    # The per-pod max policy, the maximum run time policy (team-c-dev's experiments) and the
    # Volcano queue policy.
    policies = {d["metadata"]["name"] for d in docs if d["kind"] == "ValidatingAdmissionPolicy"}
    assert policies == {
        "quota-portal-per-pod-max",
        "quota-portal-max-run-time",
        "quota-portal-volcano-queue",
    }, policies
    assert kinds.count("ValidatingAdmissionPolicyBinding") == 3
    namespaces = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Namespace"}
    annotations = namespaces["team-a-training"]["metadata"]["annotations"]
    assert annotations == {
        "quota-portal/per-pod-max.nvidia.com_gpu": "8",
        "scheduling.volcano.sh/queue-name": "team-a-training",
    }
    assert namespaces["team-c-dev"]["metadata"]["annotations"] == {
        "quota-portal/max-run-time.experiment": "86400",
        "scheduling.volcano.sh/queue-name": "team-c-dev",
    }


@pytest.fixture
def second_sandbox():
    server = SandboxServer(host="127.0.0.1", port=0).start()
    yield server
    server.stop()


def kubectl_apply(server: SandboxServer, manifest: Path, tmp_path: Path, *args: str) -> str:
    kubeconfig = server.write_kubeconfig(tmp_path / f"kubeconfig-{server.port}")
    env = {**os.environ, "KUBECACHEDIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    result = subprocess.run(
        [kubectl_binary(), "--kubeconfig", str(kubeconfig), *args, "-f", str(manifest)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_demo_export_applies_cleanly_with_kubectl(demo, kube_sandbox, second_sandbox, tmp_path):
    """Each cluster's export, applied with kubectl to a test server of its own: every object
    is accepted, and applying it again changes nothing."""
    for cluster, server in (("demo", kube_sandbox), ("demo-mig", second_sandbox)):
        text = export("--cluster", cluster)
        manifest = tmp_path / f"{cluster}.yaml"
        manifest.write_text(text)
        if cluster == "demo-mig":  # YuniKorn's installer creates its namespace
            (tmp_path / "yunikorn.yaml").write_text(
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: yunikorn\n"
            )
            kubectl_apply(server, tmp_path / "yunikorn.yaml", tmp_path, "apply")
        out = kubectl_apply(server, manifest, tmp_path, "apply")
        count = len(documents(text))
        assert out.count(" created") == count, out
        again = kubectl_apply(server, manifest, tmp_path, "apply")
        assert again.count(" unchanged") == count, again
