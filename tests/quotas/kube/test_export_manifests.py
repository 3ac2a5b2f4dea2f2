"""export_manifests on the demo data: YAML documents, namespaces first, strictly valid objects."""

from io import StringIO

import pytest
import yaml
from django.core.management import CommandError, call_command

from kubesandbox.schemas import validate_object
from quotas.kube.render import MANAGED_BY_LABEL

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
