"""Who must decide: pure policy rules."""

from decimal import Decimal as D

from approvals.policy import LineDelta, PolicyFacts, decide_policy


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
