"""What validating a request reads of its cluster: the namespaces in question (and those a
temporary grant holds guarantee in) one by one, every other allocation summed per resource and
set of priority classes, so an approval on a cluster of a thousand namespaces reads what it
changes, not the cluster."""

from datetime import timedelta
from decimal import Decimal as D

import pytest
from django.db.models import Sum
from django.utils import timezone

from approvals.budgets import holding_lines
from approvals.lifecycle import request_approve, request_submit
from approvals.models import RequestLine
from approvals.validation import _load_plans, _wanted, validate_lines
from quotas.models import Allocation, ClusterCapacity, PriorityClass, Resource, Team, TeamNamespace
from quotas.selectors import allocation_facts, allocation_facts_of
from quotas.services import allocation_set
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db
TOP = "production-inference"


def _line(ns, gpu, guarantee=2, cap=4) -> RequestLine:
    return RequestLine(
        team_namespace=ns,
        resource=gpu,
        current_guarantee=D(0),
        current_cap=D(0),
        requested_guarantee=D(guarantee),
        requested_cap=D(cap),
    )


def _allow_top(ns, gpu, admin, guarantee, cap) -> None:
    """The namespace's allocation allowed the highest priority class."""
    PriorityClass.objects.get_or_create(name=TOP, defaults={"value": 100000})
    allocation_set(
        team_namespace=ns,
        resource=gpu,
        guarantee=guarantee,
        cap=cap,
        priority_classes=[TOP],
        acting_user=admin,
    )


def _summary(plan) -> list[tuple]:
    return sorted((o.resource, o.guarantee, o.cap, sorted(o.priority_classes)) for o in plan.others)


def test_the_namespace_in_question_is_read_alone_and_the_rest_summed(plan, cluster, gpu, admin):
    plans = _load_plans(_wanted([_line(plan["team-c"], gpu)]))
    read = plans[cluster.pk]
    assert list(read.allocations) == [("team-c-dev", "nvidia.com/gpu")]
    assert read.allocations[("team-c-dev", "nvidia.com/gpu")].guarantee == 2
    # team-a (6 / 10) and team-b (4 / 6), summed.
    assert _summary(read) == [("nvidia.com/gpu", 10, 16, [])]

    # Twenty more namespaces: still one summed entry, larger.
    extra = Team.objects.create(slug="many", name="Many")
    for i in range(20):
        ns = TeamNamespace.objects.create(team=extra, cluster=cluster, name=f"many-{i}")
        allocation_set(team_namespace=ns, resource=gpu, guarantee=0, cap=1, acting_user=admin)
    read = _load_plans(_wanted([_line(plan["team-c"], gpu)]))[cluster.pk]
    assert list(read.allocations) == [("team-c-dev", "nvidia.com/gpu")]
    assert _summary(read) == [("nvidia.com/gpu", 10, 36, [])]


def test_other_namespaces_are_summed_per_set_of_priority_classes(plan, cluster, gpu, admin):
    _allow_top(plan["team-b"], gpu, admin, 4, 6)
    read = _load_plans(_wanted([_line(plan["team-c"], gpu)]))[cluster.pk]
    assert _summary(read) == [
        ("nvidia.com/gpu", 4, 6, [TOP]),
        ("nvidia.com/gpu", 6, 10, []),
    ]


def test_a_namespace_a_grant_holds_guarantee_in_is_read_alone_with_it(
    plan, cluster, gpu, admin, lead_c, strict_policy
):
    _allow_top(plan["team-c"], gpu, admin, 2, 4)
    grant = new_request(
        lead_c,
        plan["team-c"],
        gpu,
        5,
        6,
        kind="temporary",
        starts_at=timezone.now() + timedelta(days=1),
        ends_in=timedelta(days=3),
    )
    request_submit(request=grant, acting_user=lead_c)
    request_approve(request=grant, acting_user=admin)
    # A request of team-a: team-c is read alone, its grant's 3 held on top with its classes
    # (what the highest class's share counts), team-b summed.
    read = _load_plans(_wanted([_line(plan["team-a"], gpu)]))[cluster.pk]
    team_c = read.allocations[("team-c-dev", "nvidia.com/gpu")]
    assert (team_c.guarantee, team_c.held, team_c.priority_classes) == (2, 3, frozenset({TOP}))
    assert _summary(read) == [("nvidia.com/gpu", 4, 6, [])]
    # And it counts: 6 + 4 + 2 + 3 held = 15 of 16, so one more of team-a's is the limit.
    assert not [
        f for f in validate_lines([_line(plan["team-a"], gpu, 7, 10)], final=False) if f.is_error
    ]
    errors = [
        f for f in validate_lines([_line(plan["team-a"], gpu, 8, 10)], final=False) if f.is_error
    ]
    assert [f.rule for f in errors] == ["guarantees_le_capacity"]


def test_the_plan_reads_answer_what_the_orm_answers(
    plan, cluster, gpu, admin, lead_c, strict_policy
):
    """The plan check's two hand-written reads (allocation_facts_of, holding_lines) give the
    amounts the ORM gives, fractions included: on SQLite the sums come back as floats, and
    0.1 + 0.2 must still be 0.3."""
    cpu = Resource.objects.create(name="cpu", display_name="CPU", kind="cpu", unit="cores")
    ClusterCapacity.objects.create(cluster=cluster, resource=cpu, capacity=D(64))
    amounts = {"team-a": ("0.1", "0.7", "0.3"), "team-b": ("0.2", "1.1", None)}
    for slug, (guarantee, cap, per_pod) in amounts.items():
        allocation_set(
            team_namespace=plan[slug],
            resource=cpu,
            guarantee=D(guarantee),
            cap=D(cap),
            per_pod_max=None if per_pod is None else D(per_pod),
            acting_user=admin,
        )
    allocation_set(
        team_namespace=plan["team-c"], resource=cpu, guarantee=D("0.25"), cap=1, acting_user=admin
    )
    facts = list(allocation_facts_of([cluster.pk], [cpu.pk], [plan["team-a"].pk]))
    asked = [f for _c, _r, f, summed in facts if not summed]
    summed = [f for _c, _r, f, summed in facts if summed]
    alone = Allocation.objects.select_related("team_namespace__cluster", "resource").get(
        team_namespace=plan["team-a"], resource=cpu
    )
    assert asked == [allocation_facts(alone)]
    others = Allocation.objects.filter(resource=cpu).exclude(team_namespace=plan["team-a"])
    total = others.aggregate(g=Sum("guarantee"), c=Sum("cap"))
    assert [(f.guarantee, f.cap, f.namespace, f.per_pod_max) for f in summed] == [
        (total["g"], total["c"], "", None)
    ]
    assert (summed[0].guarantee, summed[0].cap) == (D("0.45"), D("2.1"))
    assert all(isinstance(v, D) for f in facts for v in (f[2].guarantee, f[2].cap))

    # A temporary grant of team-c raising its guarantee by 0.15 holds that much.
    grant = new_request(
        lead_c,
        plan["team-c"],
        cpu,
        D("0.4"),
        D("1.2"),
        kind="temporary",
        starts_at=timezone.now() + timedelta(days=1),
        ends_in=timedelta(days=3),
    )
    request_submit(request=grant, acting_user=lead_c)
    request_approve(request=grant, acting_user=admin)
    line = grant.lines.get()
    [held] = holding_lines(cluster_ids=[cluster.pk])
    assert (held.namespace_id, held.resource_id, held.team_id) == (
        plan["team-c"].pk,
        cpu.pk,
        plan["team-c"].team_id,
    )
    assert (held.current_guarantee, held.final_guarantee) == (
        line.current_guarantee,
        line.final_guarantee,
    )
    assert (held.held_guarantee, held.held_cap) == (D("0.15"), D("0.2"))
    assert holding_lines(cluster_ids=[cluster.pk], exclude_request_id=grant.pk) == []
    assert holding_lines(cluster_ids=[]) == []
