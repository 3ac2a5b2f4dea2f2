"""check_change's ``others``: the allocations no change touches may arrive summed per resource
and set of priority classes (what a request's validation reads of a large cluster), and the
findings are the same as with every allocation listed one by one: the capacity sums, the
highest priority class's share and the MIG layouts count them alike."""

from collections import defaultdict
from decimal import Decimal as D

from hypothesis import given, settings
from hypothesis import strategies as st

from quotas.rules import AllocationFacts, ClusterFacts, PlanChange, check_change

GPU = "nvidia.com/gpu"
A100 = "A100 80GB"
ONE, THREE = "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"
TOP = "production-inference"
RESOURCES = (GPU, ONE, THREE)
CLASS_SETS = (frozenset(), frozenset({TOP}), frozenset({"training"}), frozenset({TOP, "training"}))

CLUSTER = ClusterFacts(
    name="big",
    capacities={GPU: D(24), ONE: D(14), THREE: D(4)},
    max_cap_share=D("0.5"),
    whole_resources=frozenset(RESOURCES),
    gpu_cards={A100: 2},
    mig_resources={ONE: (A100, "1g.10gb"), THREE: (A100, "3g.40gb")},
    top_priority_share=D("0.3"),
    top_priority_classes=frozenset({TOP}),
)


def _summed(allocations: list[AllocationFacts]) -> list[AllocationFacts]:
    """As allocation_facts_of sums them: per resource and set of priority classes."""
    groups: dict[tuple, list[AllocationFacts]] = defaultdict(list)
    for a in allocations:
        groups[(a.resource, a.priority_classes)].append(a)
    return [
        AllocationFacts(
            cluster=CLUSTER.name,
            namespace="",
            resource=resource,
            guarantee=sum((a.guarantee for a in group), D(0)),
            cap=sum((a.cap for a in group), D(0)),
            held=sum((a.held for a in group), D(0)),
            priority_classes=classes,
        )
        for (resource, classes), group in groups.items()
    ]


allocation = st.builds(
    lambda i, resource, guarantee, extra, classes, held: AllocationFacts(
        cluster=CLUSTER.name,
        namespace=f"ns-{i}",
        resource=resource,
        guarantee=D(guarantee),
        cap=D(guarantee + extra),
        priority_classes=classes,
        held=D(held),
    ),
    st.integers(0, 30),
    st.sampled_from(RESOURCES),
    st.integers(0, 6),
    st.integers(0, 4),
    st.sampled_from(CLASS_SETS),
    st.sampled_from((0, 0, 0, 1, 2)),
)


@settings(max_examples=300, deadline=None)
@given(
    plan=st.lists(allocation, max_size=25, unique_by=lambda a: (a.namespace, a.resource)),
    namespace=st.integers(0, 30),
    resource=st.sampled_from(RESOURCES),
    guarantee=st.integers(0, 10),
    extra=st.integers(0, 4),
    classes=st.sampled_from(CLASS_SETS),
)
def test_summed_others_give_the_findings_of_the_whole_plan(
    plan, namespace, resource, guarantee, extra, classes
):
    name = f"ns-{namespace}"
    current = next((a for a in plan if (a.namespace, a.resource) == (name, resource)), None)
    change = PlanChange(
        cluster=CLUSTER.name,
        namespace=name,
        resource=resource,
        guarantee=D(guarantee),
        cap=D(guarantee + extra),
        current=current,
        priority_classes=classes,
    )
    whole = check_change(cluster=CLUSTER, allocations=plan, changes=[change])
    asked = [a for a in plan if a.namespace == name]
    rest = [a for a in plan if a.namespace != name]
    split = check_change(cluster=CLUSTER, allocations=asked, changes=[change], others=_summed(rest))
    assert split == whole


def test_summed_others_count_in_the_capacity_sum():
    # 20 of 24 guaranteed elsewhere, summed into one entry: 6 more is over capacity.
    others = [
        AllocationFacts(CLUSTER.name, "", GPU, D(20), D(40)),
    ]
    change = PlanChange(CLUSTER.name, "ns-new", GPU, D(6), D(8))
    findings = check_change(cluster=CLUSTER, allocations=[], changes=[change], others=others)
    assert [f.rule for f in findings if f.is_error] == ["guarantees_le_capacity"]
    assert "would sum to 26" in next(f.message for f in findings if f.is_error)
    # Without them the same change fits.
    assert not [
        f for f in check_change(cluster=CLUSTER, allocations=[], changes=[change]) if f.is_error
    ]


def test_entries_of_another_cluster_among_the_others_are_ignored():
    others = [AllocationFacts("elsewhere", "", GPU, D(100), D(100))]
    change = PlanChange(CLUSTER.name, "ns-new", GPU, D(6), D(8))
    findings = check_change(cluster=CLUSTER, allocations=[], changes=[change], others=others)
    assert not [f for f in findings if f.is_error]
