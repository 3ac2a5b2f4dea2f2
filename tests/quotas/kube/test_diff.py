"""Owned-field comparison: server defaults are no difference, hand edits are."""

from quotas.kube.diff import differences, live_view, owned, project, union_shape

QUOTA = {
    "apiVersion": "v1",
    "kind": "ResourceQuota",
    "metadata": {
        "name": "gpu-quota",
        "namespace": "team-a-training",
        "labels": {"app.kubernetes.io/managed-by": "gpu-quota-portal", "quota-portal/team": "a"},
    },
    "spec": {"hard": {"requests.nvidia.com/gpu": "10"}},
}


def live_of(obj, **changes):
    live = {
        **obj,
        "metadata": {
            **obj["metadata"],
            "resourceVersion": "42",
            "uid": "u-1",
            "labels": {**obj["metadata"]["labels"], "owner": "someone-else"},
            "annotations": {"note": "kept"},
        },
        "status": {"hard": {"requests.nvidia.com/gpu": "10"}, "used": {}},
    }
    live.update(changes)
    return live


def test_server_fields_and_foreign_labels_are_not_differences():
    desired = owned(QUOTA)
    assert differences(live_view(live_of(QUOTA), desired), desired) == []


def test_hand_edit_of_an_owned_value_is_a_difference_with_old_and_new():
    edited = live_of(QUOTA, spec={"hard": {"requests.nvidia.com/gpu": "20"}})
    desired = owned(QUOTA)
    assert differences(desired, live_view(edited, desired)) == [
        {"path": "spec.hard.requests.nvidia.com/gpu", "old": "10", "new": "20"}
    ]


def test_removed_key_and_removed_label_are_differences():
    live = live_of(QUOTA, spec={"hard": {}})
    live["metadata"]["labels"].pop("quota-portal/team")
    desired = owned(QUOTA)
    paths = [c["path"] for c in differences(live_view(live, desired), desired)]
    assert paths == ["labels.quota-portal/team", "spec.hard.requests.nvidia.com/gpu"]


def test_defaulted_fields_added_by_the_server_are_ignored():
    queue = {
        "apiVersion": "x/v1",
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {"capability": {"nvidia.com/gpu": "10"}, "reclaimable": True},
    }
    live = {**queue, "spec": {**queue["spec"], "weight": 1, "state": "Open"}}
    assert differences(live_view(live, owned(queue)), owned(queue)) == []


def test_numbers_and_strings_of_the_same_quantity_are_equal():
    assert differences({"a": 10}, {"a": "10"}) == []
    assert differences({"a": True}, {"a": "True"}) != []


def test_project_keeps_only_the_shape():
    assert project({"a": 1, "b": {"c": 2, "d": 3}}, {"b": {"c": 0}}) == {"b": {"c": 2}}
    assert project([{"x": 1, "y": 2}], [{"x": 0}]) == [{"x": 1}]
    assert project([1, 2], [0]) == [1, 2]  # a list of another length is compared whole


def test_union_shape_finds_fields_the_portal_wrote_before_and_no_longer_wants():
    before = owned({**QUOTA, "spec": {"hard": {"requests.nvidia.com/gpu": "10", "pods": "5"}}})
    now = owned(QUOTA)
    shape = union_shape(before, now)
    live = live_of(QUOTA, spec={"hard": {"requests.nvidia.com/gpu": "10", "pods": "5"}})
    assert differences(live_view(live, shape), now) == [
        {"path": "spec.hard.pods", "old": "5", "new": None}
    ]
    # At the desired shape alone, the leftover field is invisible.
    assert differences(live_view(live, now), now) == []


def test_configmap_data_is_owned_key_by_key():
    desired = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "yunikorn-configs", "namespace": "yunikorn"},
        "data": {"queues.yaml": "new"},
    }
    live = {**desired, "data": {"queues.yaml": "old", "log.level": "debug"}}
    view = owned(desired)
    assert live_view(live, view) == {"data": {"queues.yaml": "old"}}
