"""One shape for a managed object: built by kube_object, named by ObjectKey (pure)."""

from types import SimpleNamespace

from quotas.kube.objects import ObjectKey, kube_object


def test_kube_object_writes_identity_first_then_the_content_in_order():
    obj = kube_object("v1", "ConfigMap", {"name": "c", "namespace": "n"}, data={"a": "1"})
    assert list(obj) == ["apiVersion", "kind", "metadata", "data"]
    assert obj["data"] == {"a": "1"}


def test_the_key_of_an_object_a_row_and_back_to_row_fields():
    quota = kube_object("v1", "ResourceQuota", {"name": "gpu-quota", "namespace": "team-a"})
    key = ObjectKey.of(quota)
    assert key == ("v1", "ResourceQuota", "team-a", "gpu-quota")  # still a plain tuple
    assert (key.kind, key.namespace, key.group_kind) == (
        "ResourceQuota",
        "team-a",
        ("v1", "ResourceQuota"),
    )
    fields = key.row_fields()
    assert fields == {
        "api_version": "v1",
        "kind": "ResourceQuota",
        "namespace": "team-a",
        "name": "gpu-quota",
    }
    assert ObjectKey.of_row(SimpleNamespace(**fields)) == key


def test_a_cluster_scoped_object_has_no_namespace():
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q"},
    }
    assert ObjectKey.of(queue).namespace == ""
    assert ObjectKey.of({**queue, "metadata": {"name": "q", "namespace": None}}).namespace == ""
