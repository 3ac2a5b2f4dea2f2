"""The write order of a sync (pure): parents grow first, children shrink and go first."""

from quotas.kube.order import APPLY, DELETE, direction, shrunk, write_order

VOLCANO = "scheduling.volcano.sh/v1beta1"
KUEUE = "kueue.x-k8s.io/v1beta2"


def queue(name, parent="root", deserved=None, capability=None, guarantee=None):
    spec = {"parent": parent, "deserved": deserved or {}, "capability": capability or {}}
    if guarantee:
        spec["guarantee"] = {"resource": guarantee}
    return {"apiVersion": VOLCANO, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def key(name, kind="Queue", api=VOLCANO, namespace=""):
    return (api, kind, namespace, name)


def gpus(deserved, capability):
    return {
        "deserved": {"nvidia.com/gpu": str(deserved)},
        "capability": {"nvidia.com/gpu": str(capability)},
    }


def dept_and_teams(dept, a, b):
    """A department with teams a and b: (deserved, capability) each, the department the sum."""
    return [
        queue("dept", **gpus(dept[0], dept[1])),
        queue("team-a", parent="dept", **gpus(*a)),
        queue("team-b", parent="dept", **gpus(*b)),
    ]


def live_of(objects):
    return {key(o["metadata"]["name"]): o for o in objects}


def names(steps):
    return [(s.op, s.key[3], s.intermediate) for s in steps]


def test_growing_writes_the_parent_before_its_children():
    live = live_of(dept_and_teams((6, 10), (4, 6), (2, 4)))
    desired = dept_and_teams((8, 12), (6, 8), (2, 4))
    steps = write_order(desired, live)
    order = [s.key[3] for s in steps]
    assert order.index("dept") < order.index("team-a")


def test_shrinking_writes_children_before_their_parent():
    live = live_of(dept_and_teams((8, 12), (6, 8), (2, 4)))
    desired = dept_and_teams((6, 10), (4, 6), (2, 4))
    steps = write_order(desired, live)
    order = [s.key[3] for s in steps]
    assert order.index("team-a") < order.index("dept")


def test_deleting_children_before_the_parent_and_after_nothing_else():
    live = live_of(dept_and_teams((6, 10), (4, 6), (2, 4)))
    steps = write_order([], live, prune=[key("dept"), key("team-a"), key("team-b")])
    assert [s.op for s in steps] == [DELETE] * 3
    assert steps[-1].key[3] == "dept"


def test_a_mixed_change_is_written_shrunk_first_then_whole():
    # team-a gives up 2 guaranteed GPUs and team-b takes them; team-a's cap grows.
    live = live_of(dept_and_teams((6, 10), (4, 6), (2, 4)))
    desired = dept_and_teams((6, 12), (2, 8), (4, 4))
    steps = write_order(desired, live)
    assert names(steps)[0] == (APPLY, "team-a", True)
    first = steps[0].obj["spec"]
    assert first["deserved"] == {"nvidia.com/gpu": "2"}  # the smaller of 4 and 2
    assert first["capability"] == {"nvidia.com/gpu": "6"}  # the smaller of 6 and 8
    later = [n for n in names(steps)[1:]]
    assert later.index((APPLY, "dept", False)) < later.index((APPLY, "team-a", False))
    assert later.index((APPLY, "dept", False)) < later.index((APPLY, "team-b", False))


def test_every_step_keeps_the_department_sums_within_the_parent():
    """Replays the steps against the webhook's sum rule for a department shrink + grow mix."""
    live = live_of(dept_and_teams((6, 10), (4, 6), (2, 4)))
    desired = dept_and_teams((5, 9), (1, 5), (4, 4))
    state = {k[3]: v for k, v in live.items()}
    for step in write_order(desired, live):
        state[step.key[3]] = step.obj
        dept = int(state["dept"]["spec"]["deserved"]["nvidia.com/gpu"])
        children = sum(
            int(state[t]["spec"]["deserved"]["nvidia.com/gpu"]) for t in ("team-a", "team-b")
        )
        assert children <= dept, (step, state)
        for team in ("team-a", "team-b"):
            cap = int(state[team]["spec"]["capability"]["nvidia.com/gpu"])
            assert cap <= int(state["dept"]["spec"]["capability"]["nvidia.com/gpu"])


def test_new_queues_are_created_parents_first_whatever_the_input_order():
    desired = list(reversed(dept_and_teams((6, 10), (4, 6), (2, 4))))
    steps = write_order(desired, {})
    assert steps[0].key[3] == "dept"


def test_direction_and_shrunk_of_amounts():
    old = queue("q", **gpus(4, 6), guarantee={"nvidia.com/gpu": "4"})
    assert direction(old, queue("q", **gpus(4, 8))) == (True, True)  # guarantee dropped
    assert direction(old, queue("q", **gpus(5, 6), guarantee={"nvidia.com/gpu": "4"})) == (
        True,
        False,
    )
    # No capability means unlimited: dropping it grows.
    assert direction(queue("q", **gpus(4, 6)), queue("q", deserved={"nvidia.com/gpu": "4"})) == (
        True,
        False,
    )
    mid = shrunk(old, queue("q", **gpus(5, 5)))
    assert mid["spec"]["deserved"] == {"nvidia.com/gpu": "4"}
    assert mid["spec"]["capability"] == {"nvidia.com/gpu": "5"}
    assert "guarantee" not in mid["spec"]


def test_other_kinds_keep_their_order_and_other_deletes_come_last():
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t"}}
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu-quota", "namespace": "t"},
    }
    gone = [("v1", "LimitRange", "t", "gpu-limits"), key("old-team")]
    live = {key("old-team"): queue("old-team")}
    steps = write_order([ns, quota], live, prune=gone)
    assert names(steps) == [
        (DELETE, "old-team", False),
        (APPLY, "t", False),
        (APPLY, "gpu-quota", False),
        (DELETE, "gpu-limits", False),
    ]


def test_kueue_cohorts_are_created_parents_first_and_deleted_children_first():
    def cohort(name, parent=None):
        spec = {"parentName": parent} if parent else {}
        return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}

    created = write_order([cohort("dept", "portal"), cohort("portal")], {})
    assert [s.key[3] for s in created] == ["portal", "dept"]
    live = {
        key(n, "Cohort", KUEUE): cohort(n, p) for n, p in (("portal", None), ("dept", "portal"))
    }
    deleted = write_order(
        [], live, prune=[key("portal", "Cohort", KUEUE), key("dept", "Cohort", KUEUE)]
    )
    assert [s.key[3] for s in deleted] == ["dept", "portal"]
