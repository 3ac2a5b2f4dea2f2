"""The rules of one allocation live in one place (quotas.rules.allocation_problems): the plan's
findings and the services' refusal of an allocation's values give the same text at the same
field for the same broken rule."""

from decimal import Decimal as D

import pytest

from common.errors import ValidationFailed
from quotas.rules import ERROR, AllocationFacts, ClusterFacts, allocation_problems, check_plan
from quotas.services import allocation_set, allocation_values_check

GPU = "nvidia.com/gpu"
BAD = [
    # guarantee, cap, per-pod max: the rule broken first
    (D(-1), D(4), None, "negative"),
    (D(1), D(-2), None, "negative"),
    (D("6.5"), D(8), None, "whole_units"),
    (D(2), D(4), D("1.5"), "whole_units"),
    (D(1), D(4), D(0), "per_pod_max_positive"),
    (D(1), D(4), D(-1), "per_pod_max_positive"),
    (D(6), D(4), None, "guarantee_le_cap"),
    (D(1), D(4), D(5), "per_pod_max_le_cap"),
]


def _plan_errors(guarantee, cap, per_pod_max):
    cluster = ClusterFacts(
        name="demo",
        capacities={GPU: D(100)},
        max_cap_share=D(1),
        whole_resources=frozenset({GPU}),
    )
    allocation = AllocationFacts("demo", "team-a-training", GPU, guarantee, cap, per_pod_max)
    return [f for f in check_plan(cluster=cluster, allocations=[allocation]) if f.level == ERROR]


@pytest.mark.parametrize(("guarantee", "cap", "per_pod_max", "rule"), BAD)
def test_the_plan_and_the_service_refuse_with_the_same_text(guarantee, cap, per_pod_max, rule):
    first = _plan_errors(guarantee, cap, per_pod_max)[0]
    assert first.rule == rule
    [(_, field, text), *_] = allocation_problems(
        guarantee=guarantee,
        cap=cap,
        per_pod_max=per_pod_max,
        where=f"team-a-training {GPU}",
        whole_units_of=GPU,
    )
    assert (field, str(text)) == (first.field, first.message)


@pytest.mark.django_db
@pytest.mark.parametrize(("guarantee", "cap", "per_pod_max", "rule"), BAD)
def test_setting_an_allocation_is_refused_with_the_plan_s_text(
    ns_a, gpu, admin, guarantee, cap, per_pod_max, rule
):
    first = _plan_errors(guarantee, cap, per_pod_max)[0]
    with pytest.raises(ValidationFailed) as refused:
        allocation_set(
            team_namespace=ns_a,
            resource=gpu,
            guarantee=guarantee,
            cap=cap,
            per_pod_max=per_pod_max,
            acting_user=admin,
        )
    assert (refused.value.field, refused.value.message) == (first.field, first.message)


def test_values_that_are_no_numbers_are_refused_before_the_rules():
    with pytest.raises(ValidationFailed, match="guarantee must be a number"):
        allocation_values_check(guarantee="ten", cap=4, per_pod_max=None, where="ns gpu")
    assert allocation_values_check(guarantee="1", cap="4", per_pod_max="", where="ns gpu") == (
        D(1),
        D(4),
        None,
    )
