"""Who must decide: pure policy rules."""

from decimal import Decimal as D

import pytest

from approvals.policy.rules import LineDelta, PolicyFacts, decide_policy, hold_for_waiting


def line(g0, g1, c0, c1, cluster="demo"):
    return LineDelta(cluster, D(g0), D(g1), D(c0), D(c1))


def test_decrease_only_is_auto_approved():
    decision = decide_policy([line(6, 4, 10, 8)], {}, plan_has_errors=False)
    assert decision.auto_approve and decision.approvals_needed == 0


def test_decreases_need_an_admin_when_the_policy_says_so():
    policies = {"demo": PolicyFacts(auto_approve_decreases=False, auto_approve_increase_max=D(0))}
    decision = decide_policy([line(6, 4, 10, 8)], policies, plan_has_errors=False)
    assert not decision.auto_approve and decision.approvals_needed == 1


def test_small_increase_within_threshold_is_auto_approved():
    decision = decide_policy([line(2, 3, 4, 5)], {}, plan_has_errors=False)
    assert decision.auto_approve


def test_increase_above_auto_threshold_needs_one_admin():
    decision = decide_policy([line(2, 4, 4, 6)], {}, plan_has_errors=False)
    assert (decision.auto_approve, decision.approvals_needed) == (False, 1)


def test_increase_above_two_admin_threshold_needs_two():
    decision = decide_policy([line(2, 2, 4, 9)], {}, plan_has_errors=False)
    assert (decision.auto_approve, decision.approvals_needed) == (False, 2)
    assert "increase of 5 on demo is above 4" in decision.reason


def test_the_strictest_cluster_policy_wins():
    policies = {
        "big": PolicyFacts(two_admins_above=D(10)),
        "small": PolicyFacts(two_admins_above=D(1)),
    }
    decision = decide_policy(
        [line(0, 2, 0, 2, "big"), line(0, 2, 0, 2, "small")], policies, plan_has_errors=False
    )
    assert decision.approvals_needed == 2


def test_nothing_with_plan_errors_is_auto_approved():
    decision = decide_policy([line(2, 3, 4, 5)], {}, plan_has_errors=True)
    assert not decision.auto_approve


# --- every field, budgets, waiting requests ----------------------------------------------------

VALUES = {"production-inference": 100000, "training": 10000, "experiment": 1000}


def fields(**kwargs) -> LineDelta:
    base = {
        "cluster": "demo",
        "guarantee_before": D(2),
        "guarantee_after": D(2),
        "cap_before": D(4),
        "cap_after": D(4),
        "where": "team-c-dev nvidia.com/gpu",
        "class_values": VALUES,
    }
    return LineDelta(**{**base, **kwargs})


def test_adding_a_class_that_outranks_the_allowed_ones_is_named_and_waits():
    delta = fields(
        classes_before=frozenset({"experiment"}),
        classes_after=frozenset({"experiment", "production-inference"}),
    )
    assert not delta.is_decrease_only
    decision = decide_policy([delta], {}, plan_has_errors=False)
    # By default a class that outranks the allowed ones lets the team preempt: two admins.
    assert (decision.auto_approve, decision.approvals_needed) == (False, 2)
    assert decision.reason == (
        "adds priority class production-inference (value 100000, above experiment 1000, the "
        "highest it allows now) on team-c-dev nvidia.com/gpu: a higher priority class lets the "
        "team preempt others, two admins must approve"
    )
    one = {"demo": PolicyFacts(two_admins_for_higher_class=False)}
    decision = decide_policy([delta], one, plan_has_errors=False)
    assert (decision.auto_approve, decision.approvals_needed) == (False, 1)
    assert decision.reason.endswith(
        "the highest it allows now) on team-c-dev nvidia.com/gpu: a platform admin must approve"
    )


@pytest.mark.parametrize(
    ("before", "after", "needed"),
    [
        ({"experiment"}, set(), 2),  # no restriction: production-inference is allowed too
        ({"production-inference"}, set(), 1),  # nothing above what it has
        ({"production-inference"}, {"production-inference", "experiment"}, 1),  # a lower one
        (set(), {"production-inference"}, 0),  # a restriction is a narrowing
    ],
)
def test_only_a_class_above_the_allowed_ones_needs_two_admins(before, after, needed):
    delta = fields(classes_before=frozenset(before), classes_after=frozenset(after))
    decision = decide_policy([delta], {}, plan_has_errors=False)
    assert decision.approvals_needed == needed, decision.reason
    if needed == 2 and not after:
        assert "allowing production-inference (value 100000, above experiment 1000" in (
            decision.reason
        )


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"per_pod_max_before": D(2), "per_pod_max_after": None}, "removes the per-pod max"),
        ({"per_pod_max_before": D(2), "per_pod_max_after": D(3)}, "raises the per-pod max"),
        (
            {"classes_before": frozenset({"experiment"}), "classes_after": frozenset()},
            "removes the priority-class restriction (was: experiment)",
        ),
        (
            {
                "classes_before": frozenset({"training"}),
                "classes_after": frozenset({"experiment"}),
            },
            "adds priority class experiment on",
        ),
    ],
)
def test_widening_even_with_lower_amounts_waits_for_an_admin(change, said):
    delta = fields(guarantee_after=D(1), cap_after=D(3), **change)
    decision = decide_policy([delta], {}, plan_has_errors=False)
    assert not decision.auto_approve
    assert said in decision.reason


@pytest.mark.parametrize(
    "change",
    [
        {"per_pod_max_before": None, "per_pod_max_after": D(2)},
        {"per_pod_max_before": D(3), "per_pod_max_after": D(2)},
        {"classes_before": frozenset(), "classes_after": frozenset({"experiment"})},
        {
            "classes_before": frozenset({"experiment", "training"}),
            "classes_after": frozenset({"experiment"}),
        },
    ],
)
def test_narrowing_is_a_decrease(change):
    delta = fields(cap_after=D(3), **change)
    assert delta.is_decrease_only
    assert decide_policy([delta], {}, plan_has_errors=False).auto_approve


def test_auto_approval_budget_stops_small_steps():
    step = line(4, 5, 6, 7, cluster="demo")
    policies = {"demo": PolicyFacts(auto_approve_budget=D(2), auto_approve_period_days=30)}
    first = decide_policy([step], policies, plan_has_errors=False, budget_used={"demo": D(1)})
    assert first.auto_approve
    over = decide_policy(
        [step], policies, plan_has_errors=False, budget_used={"demo": D(2)}, team="team-b"
    )
    assert (over.auto_approve, over.approvals_needed) == (False, 1)
    assert over.reason == (
        "the auto-approval budget of team-b on demo is 2 per 30 days; 2 was approved "
        "automatically already and this request adds 1: a platform admin must approve"
    )


def test_budget_counts_every_line_on_the_cluster_and_not_decreases():
    policies = {"demo": PolicyFacts(auto_approve_budget=D(2))}
    # (From a cap of 1: a line from a cap of 0 allows classes where none were allowed.)
    two_lines = [line(0, 1, 1, 2), line(0, 1, 1, 2), line(5, 4, 6, 5)]
    assert decide_policy(two_lines, policies, plan_has_errors=False).auto_approve
    three = [*two_lines, line(0, 1, 1, 2)]
    assert not decide_policy(three, policies, plan_has_errors=False).auto_approve
    decrease = decide_policy(
        [line(5, 4, 6, 5)], policies, plan_has_errors=False, budget_used={"demo": D(9)}
    )
    assert decrease.auto_approve


def test_an_auto_approval_that_blocks_a_waiting_request_waits():
    decision = decide_policy([line(2, 3, 4, 4)], {}, plan_has_errors=False)
    held = hold_for_waiting(decision, ["request #7 (waiting for an admin) unable to fit: x"])
    assert (held.auto_approve, held.approvals_needed) == (False, 1)
    assert "request #7" in held.reason
    assert hold_for_waiting(decision, []) is decision


# --- a line where nothing is allowed yet (no allocation, or a cap of 0) ------------------------


def new_line(after: set, *, cap_before=0, cap_after=1, **kwargs) -> LineDelta:
    """A line for a resource the namespace has no allocation of: everything from nothing."""
    return fields(
        guarantee_before=D(0),
        guarantee_after=D(0),
        cap_before=D(cap_before),
        cap_after=D(cap_after),
        classes_after=frozenset(after),
        **kwargs,
    )


@pytest.mark.parametrize(
    ("after", "said"),
    [
        (
            {"production-inference"},
            "allows priority class production-inference (none allowed yet) on team-c-dev",
        ),
        (set(), "allows every priority class, up to production-inference (none allowed yet)"),
        ({"experiment", "training"}, "allows priority class training (none allowed yet)"),
    ],
)
def test_a_new_line_allowing_classes_is_a_widening_above_nothing(after, said):
    delta = new_line(after)
    assert not delta.is_decrease_only
    decision = decide_policy([delta], {}, plan_has_errors=False)
    # Nothing is allowed there yet: every class it allows is above every class allowed now.
    assert (decision.auto_approve, decision.approvals_needed) == (False, 2), decision.reason
    assert said in decision.reason
    assert decision.reason.endswith("lets the team preempt others, two admins must approve")
    off = {"demo": PolicyFacts(two_admins_for_higher_class=False)}
    decision = decide_policy([delta], off, plan_has_errors=False)
    assert (decision.auto_approve, decision.approvals_needed) == (False, 1)


def test_a_new_line_of_the_lowest_class_only_is_a_widening_one_admin_approves():
    decision = decide_policy([new_line({"experiment"})], {}, plan_has_errors=False)
    assert (decision.auto_approve, decision.approvals_needed) == (False, 1), decision.reason
    assert "allows priority class experiment (none allowed yet)" in decision.reason


def test_a_cap_of_zero_allows_nothing_whatever_classes_it_lists():
    # An allocation lowered to 0 keeps its list; raising it again is judged from nothing.
    delta = new_line({"production-inference"}, classes_before=frozenset({"production-inference"}))
    assert delta.outranking
    # A line that leaves the cap at 0 allows nothing either: a decrease at most.
    assert new_line(set(), cap_after=0).is_decrease_only
    # Without known classes, no class restriction is still a widening (one admin).
    plain = new_line(set(), class_values={})
    decision = decide_policy([plain], {}, plan_has_errors=False)
    assert (decision.auto_approve, decision.approvals_needed) == (False, 1)
    assert "allows every priority class (none allowed yet)" in decision.reason
