"""Rules of the guarantee + elastic model, checked on plain data (no database)."""

from decimal import Decimal as D

import pytest

from quotas.rules import (
    ERROR,
    WARNING,
    AllocationFacts,
    ClusterFacts,
    Finding,
    PlanChange,
    UsageFacts,
    check_change,
    check_plan,
    has_errors,
)

GPU = "nvidia.com/gpu"
MIG = "nvidia.com/mig-1g.10gb"


def cluster_facts(
    *,
    capacity: D | int = 16,
    share: str = "0.5",
    backends: tuple[str, ...] = ("core",),
    name: str = "demo",
) -> ClusterFacts:
    return ClusterFacts(
        name=name,
        capacities={GPU: D(capacity)},
        max_cap_share=D(share),
        backends=frozenset(backends),
    )


def alloc(namespace: str, guarantee, cap, per_pod_max=None, resource: str = GPU) -> AllocationFacts:
    return AllocationFacts(
        cluster="demo",
        namespace=namespace,
        resource=resource,
        guarantee=D(guarantee),
        cap=D(cap),
        per_pod_max=None if per_pod_max is None else D(per_pod_max),
    )


def change(
    current: AllocationFacts | None,
    guarantee,
    cap,
    per_pod_max=None,
    *,
    namespace: str | None = None,
    resource: str = GPU,
) -> PlanChange:
    return PlanChange(
        cluster="demo",
        namespace=namespace or current.namespace,
        resource=current.resource if current else resource,
        guarantee=D(guarantee),
        cap=D(cap),
        per_pod_max=None if per_pod_max is None else D(per_pod_max),
        current=current,
    )


# A plan within every rule: 16 GPUs, 6+4+2 = 12 guaranteed, caps at most 8.
TEAM_A = alloc("team-a-training", 6, 8, 4)
TEAM_B = alloc("team-b-inference", 4, 6, 2)
TEAM_C = alloc("team-c-dev", 2, 4)
CLEAN_PLAN = [TEAM_A, TEAM_B, TEAM_C]


def rules_of(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.level, f.rule) for f in findings]


def only(findings: list[Finding], rule: str) -> Finding:
    matching = [f for f in findings if f.rule == rule]
    assert len(matching) == 1, findings
    return matching[0]


# --------------------------------------------------------------------------------------------
# The seed's example


def test_seed_example_has_exactly_team_a_cap_above_half_the_cluster():
    seed = [alloc("team-a-training", 6, 10, 8), TEAM_B, TEAM_C]
    findings = check_plan(cluster=cluster_facts(backends=("core", "volcano")), allocations=seed)
    assert findings == [
        Finding(
            level=ERROR,
            rule="cap_le_share",
            field="cap",
            message="cap 10 exceeds 50% of cluster demo capacity 16 nvidia.com/gpu (max 8)",
            cluster="demo",
            namespace="team-a-training",
            resource=GPU,
        )
    ]


def test_clean_plan_has_no_findings():
    assert check_plan(cluster=cluster_facts(), allocations=CLEAN_PLAN) == []
    no_op = [change(TEAM_A, 6, 8, 4)]
    assert check_change(cluster=cluster_facts(), allocations=CLEAN_PLAN, changes=no_op) == []


# --------------------------------------------------------------------------------------------
# 1. guarantee ≤ cap, and what it means per backend


def test_guarantee_above_cap_is_an_error():
    findings = check_change(
        cluster=cluster_facts(), allocations=CLEAN_PLAN, changes=[change(TEAM_A, 8, 7, 4)]
    )
    finding = only(findings, "guarantee_le_cap")
    assert finding.level == ERROR
    assert finding.field == "guarantee"
    assert finding.message == (
        "guarantee 8 exceeds cap 7 for team-a-training nvidia.com/gpu (guarantee ≤ cap)"
    )


def test_guarantee_above_cap_on_volcano_names_the_queue_consequence():
    findings = check_change(
        cluster=cluster_facts(backends=("core", "volcano")),
        allocations=CLEAN_PLAN,
        changes=[change(TEAM_A, 8, 7, 4)],
    )
    assert has_errors(findings)
    assert only(findings, "guarantee_le_cap").message == (
        "guarantee 8 exceeds cap 7 for team-a-training nvidia.com/gpu (guarantee ≤ cap) "
        "(Volcano: capability must be ≥ deserved)"
    )


def test_guarantee_above_cap_on_kueue_names_the_negative_borrowing_limit():
    findings = check_change(
        cluster=cluster_facts(backends=("core", "kueue", "yunikorn")),
        allocations=CLEAN_PLAN,
        changes=[change(TEAM_A, 8, 7, 4)],
    )
    assert has_errors(findings)
    assert only(findings, "guarantee_le_cap").message == (
        "guarantee 8 exceeds cap 7 for team-a-training nvidia.com/gpu (guarantee ≤ cap) "
        "(Kueue: borrowingLimit = cap - guarantee would be -1; "
        "YuniKorn: max must be ≥ guaranteed)"
    )


def test_guarantee_equal_to_cap_is_fine_on_every_backend():
    cluster = cluster_facts(backends=("core", "volcano", "kueue", "yunikorn"))
    findings = check_change(
        cluster=cluster, allocations=CLEAN_PLAN, changes=[change(TEAM_A, 7, 7, 4)]
    )
    assert findings == []


# --------------------------------------------------------------------------------------------
# 2. per-pod max ≤ cap


def test_per_pod_max_above_cap_is_an_error():
    findings = check_change(
        cluster=cluster_facts(), allocations=CLEAN_PLAN, changes=[change(TEAM_A, 6, 8, 9)]
    )
    finding = only(findings, "per_pod_max_le_cap")
    assert (finding.level, finding.field) == (ERROR, "per_pod_max")
    assert finding.message == (
        "per-pod max 9 exceeds cap 8 for team-a-training nvidia.com/gpu (per-pod max ≤ cap)"
    )


def test_no_per_pod_max_is_fine():
    findings = check_change(
        cluster=cluster_facts(), allocations=CLEAN_PLAN, changes=[change(TEAM_A, 6, 8, None)]
    )
    assert findings == []


def test_zero_per_pod_max_is_an_error():
    findings = check_change(
        cluster=cluster_facts(), allocations=CLEAN_PLAN, changes=[change(TEAM_A, 6, 8, 0)]
    )
    finding = only(findings, "per_pod_max_positive")
    assert finding.level == ERROR
    assert finding.message == (
        "per-pod max 0 for team-a-training nvidia.com/gpu must be positive (or empty)"
    )


def test_negative_amounts_are_errors():
    findings = check_change(
        cluster=cluster_facts(), allocations=CLEAN_PLAN, changes=[change(TEAM_A, -1, 8, 4)]
    )
    finding = only(findings, "negative")
    assert (finding.level, finding.field) == (ERROR, "guarantee")
    assert finding.message == "guarantee -1 for team-a-training nvidia.com/gpu must not be negative"


# --------------------------------------------------------------------------------------------
# 3. Sum of guarantees ≤ capacity


def test_guarantees_above_capacity_is_an_error_naming_the_free_amount_before_the_change():
    # 12 of 16 guaranteed, 4 free; team A asks 6 -> 12, the sum would be 18.
    findings = check_change(
        cluster=cluster_facts(share="1"),
        allocations=CLEAN_PLAN,
        changes=[change(TEAM_A, 12, 12, 4)],
    )
    finding = only(findings, "guarantees_le_capacity")
    assert finding.level == ERROR
    assert (finding.cluster, finding.namespace, finding.resource) == ("demo", "", GPU)
    assert finding.message == (
        "guarantees on cluster demo would sum to 18 nvidia.com/gpu, above its capacity 16 "
        "(free to guarantee: 4)"
    )


def test_guarantees_exactly_at_capacity_are_fine():
    findings = check_change(
        cluster=cluster_facts(), allocations=CLEAN_PLAN, changes=[change(TEAM_A, 8, 8, 4)]
    )
    assert "guarantees_le_capacity" not in {f.rule for f in findings}


def test_several_lines_of_one_request_are_summed_together():
    # 4 of 16 are free; each line alone fits (12 + 3 = 15, 12 + 2 = 14), together they need 17.
    cluster = cluster_facts(share="1")
    line_a, line_b = change(TEAM_A, 9, 9, 4), change(TEAM_B, 6, 6, 2)
    alone_a = check_change(cluster=cluster, allocations=CLEAN_PLAN, changes=[line_a])
    alone_b = check_change(cluster=cluster, allocations=CLEAN_PLAN, changes=[line_b])
    assert not has_errors(alone_a)
    assert not has_errors(alone_b)
    together = check_change(cluster=cluster, allocations=CLEAN_PLAN, changes=[line_a, line_b])
    assert rules_of(together) == [(ERROR, "guarantees_le_capacity")]
    assert together[0].message == (
        "guarantees on cluster demo would sum to 17 nvidia.com/gpu, above its capacity 16 "
        "(free to guarantee: 4)"
    )


def test_a_decrease_on_one_line_makes_room_for_an_increase_on_another():
    findings = check_change(
        cluster=cluster_facts(),
        allocations=CLEAN_PLAN,
        changes=[change(TEAM_A, 4, 8, 4), change(TEAM_B, 8, 8, 2)],  # 4 + 8 + 2 = 14
    )
    assert "guarantees_le_capacity" not in {f.rule for f in findings}


OVER_PROMISED = [alloc("team-a-training", 8, 8), alloc("team-b-inference", 8, 8), TEAM_C]  # 18


def test_a_decrease_on_an_over_promised_cluster_is_not_blocked():
    findings = check_change(
        cluster=cluster_facts(),
        allocations=OVER_PROMISED,
        changes=[change(OVER_PROMISED[0], 7, 8)],
    )
    assert not has_errors(findings)
    finding = only(findings, "guarantees_le_capacity")
    assert finding.level == WARNING
    assert finding.message == (
        "guarantees on cluster demo sum to 18 nvidia.com/gpu, above its capacity 16; "
        "this change lowers it to 17"
    )


def test_a_change_keeping_the_sum_on_an_over_promised_cluster_is_not_blocked():
    findings = check_change(
        cluster=cluster_facts(),
        allocations=OVER_PROMISED,
        changes=[change(OVER_PROMISED[0], 8, 8, 2)],  # only the per-pod max moves
    )
    assert not has_errors(findings)
    assert only(findings, "guarantees_le_capacity").message.endswith("this change keeps it at 18")


def test_an_increase_on_an_over_promised_cluster_is_blocked_with_nothing_free():
    findings = check_change(
        cluster=cluster_facts(),
        allocations=OVER_PROMISED,
        changes=[change(TEAM_C, 3, 4)],
    )
    finding = only(findings, "guarantees_le_capacity")
    assert finding.level == ERROR
    assert finding.message == (
        "guarantees on cluster demo would sum to 19 nvidia.com/gpu, above its capacity 16 "
        "(free to guarantee: 0)"
    )


def test_check_plan_reports_an_over_promised_cluster():
    findings = check_plan(cluster=cluster_facts(), allocations=OVER_PROMISED)
    assert only(findings, "guarantees_le_capacity").message == (
        "guarantees on cluster demo sum to 18 nvidia.com/gpu, above its capacity 16 (over by 2)"
    )


def test_allocations_may_leave_out_the_changed_one():
    """The changed allocation's current value stands in for it in the sum before the change."""
    others = [TEAM_B, TEAM_C]
    findings = check_change(
        cluster=cluster_facts(share="1"), allocations=others, changes=[change(TEAM_A, 12, 12, 4)]
    )
    assert only(findings, "guarantees_le_capacity").message.endswith("(free to guarantee: 4)")


def test_later_allocation_entries_replace_earlier_ones():
    """Approved-but-not-applied values follow the stored rows and count instead of them."""
    approved_b = alloc("team-b-inference", 8, 8, 2)
    findings = check_change(
        cluster=cluster_facts(),
        allocations=[*CLEAN_PLAN, approved_b],  # 6 + 8 + 2 = 16 promised
        changes=[change(TEAM_C, 3, 4)],
    )
    assert only(findings, "guarantees_le_capacity").message == (
        "guarantees on cluster demo would sum to 17 nvidia.com/gpu, above its capacity 16 "
        "(free to guarantee: 0)"
    )


def test_other_clusters_and_other_resources_do_not_count():
    elsewhere = AllocationFacts("other", "team-x", GPU, D(16), D(16))
    mig = alloc("team-a-training", 100, 100, resource=MIG)
    cluster = ClusterFacts("demo", {GPU: D(16), MIG: D(100)}, D(1), frozenset())
    findings = check_change(
        cluster=cluster, allocations=[*CLEAN_PLAN, elsewhere, mig], changes=[change(TEAM_A, 8, 8)]
    )
    assert findings == []


# --------------------------------------------------------------------------------------------
# 4. cap ≤ share of capacity


def test_cap_above_the_share_is_an_error_with_the_exact_message():
    findings = check_change(
        cluster=cluster_facts(), allocations=CLEAN_PLAN, changes=[change(TEAM_A, 6, 10, 4)]
    )
    assert findings == [
        Finding(
            ERROR,
            "cap_le_share",
            "cap",
            "cap 10 exceeds 50% of cluster demo capacity 16 nvidia.com/gpu (max 8)",
            "demo",
            "team-a-training",
            GPU,
        )
    ]


def test_cap_share_with_decimals_is_printed_without_trailing_zeros():
    cluster = ClusterFacts("demo", {GPU: D("16.000")}, D("0.375"), frozenset())
    findings = check_change(
        cluster=cluster, allocations=CLEAN_PLAN, changes=[change(TEAM_C, D("2.000"), D("6.500"))]
    )
    assert only(findings, "cap_le_share").message == (
        "cap 6.5 exceeds 37.5% of cluster demo capacity 16 nvidia.com/gpu (max 6)"
    )


def test_max_cap_share_of_one_allows_a_cap_of_the_whole_cluster():
    cluster = cluster_facts(share="1.000")
    ok = check_change(cluster=cluster, allocations=CLEAN_PLAN, changes=[change(TEAM_A, 6, 16, 4)])
    assert not has_errors(ok)
    too_much = check_change(
        cluster=cluster, allocations=CLEAN_PLAN, changes=[change(TEAM_A, 6, 17, 4)]
    )
    assert only(too_much, "cap_le_share").message == (
        "cap 17 exceeds 100% of cluster demo capacity 16 nvidia.com/gpu (max 16)"
    )


def test_a_cap_already_above_the_share_does_not_block_a_change_that_does_not_raise_it():
    seed_a = alloc("team-a-training", 6, 10, 8)
    cluster = cluster_facts()
    plan = [seed_a, TEAM_B, TEAM_C]
    lower_guarantee = check_change(
        cluster=cluster, allocations=plan, changes=[change(seed_a, 5, 10, 8)]
    )
    assert not has_errors(lower_guarantee)
    finding = only(lower_guarantee, "cap_le_share")
    assert finding.level == WARNING
    assert finding.message == (
        "cap 10 exceeds 50% of cluster demo capacity 16 nvidia.com/gpu (max 8); "
        "not blocking, the cap does not rise (was 10)"
    )
    lower_cap = check_change(cluster=cluster, allocations=plan, changes=[change(seed_a, 6, 9, 8)])
    assert not has_errors(lower_cap)
    raise_cap = check_change(cluster=cluster, allocations=plan, changes=[change(seed_a, 6, 11, 8)])
    assert only(raise_cap, "cap_le_share").level == ERROR


# --------------------------------------------------------------------------------------------
# 5. Unknown and zero capacity


def test_a_resource_without_capacity_is_an_error():
    findings = check_change(
        cluster=cluster_facts(),
        allocations=CLEAN_PLAN,
        changes=[change(None, 1, 2, namespace="team-a-training", resource=MIG)],
    )
    assert rules_of(findings) == [(ERROR, "unknown_capacity")]
    finding = findings[0]
    assert (finding.field, finding.resource) == ("resource", MIG)
    assert finding.message == "cluster demo has no capacity for nvidia.com/mig-1g.10gb"


def test_zeroing_an_allocation_without_capacity_is_allowed():
    stale = alloc("team-a-training", 1, 2, resource=MIG)
    findings = check_change(
        cluster=cluster_facts(), allocations=[*CLEAN_PLAN, stale], changes=[change(stale, 0, 0)]
    )
    assert findings == []


def test_zero_capacity_allows_nothing_but_zero():
    cluster = cluster_facts(capacity=0)
    findings = check_change(
        cluster=cluster,
        allocations=[],
        changes=[change(None, 1, 1, namespace="team-a-training")],
    )
    assert rules_of(findings) == [(ERROR, "guarantees_le_capacity"), (ERROR, "cap_le_share")]
    assert findings[0].message == (
        "guarantees on cluster demo would sum to 1 nvidia.com/gpu, above its capacity 0 "
        "(free to guarantee: 0)"
    )
    assert findings[1].message == (
        "cap 1 exceeds 50% of cluster demo capacity 0 nvidia.com/gpu (max 0)"
    )
    zero = check_change(
        cluster=cluster, allocations=[], changes=[change(None, 0, 0, namespace="team-a-training")]
    )
    assert zero == []


# --------------------------------------------------------------------------------------------
# New allocations


def test_a_new_allocation_is_checked_like_any_other():
    new_ns = change(None, 3, 4, 2, namespace="team-d-dev")
    assert check_change(cluster=cluster_facts(), allocations=CLEAN_PLAN, changes=[new_ns]) == []
    too_big = change(None, 5, 9, 2, namespace="team-d-dev")
    findings = check_change(cluster=cluster_facts(), allocations=CLEAN_PLAN, changes=[too_big])
    assert rules_of(findings) == [
        (ERROR, "guarantees_le_capacity"),
        (ERROR, "cap_le_share"),
        (WARNING, "large_jump"),
        (WARNING, "large_jump"),
    ]
    assert findings[0].message.startswith("guarantees on cluster demo would sum to 17")
    assert [f.message for f in findings[2:]] == [
        "cap rises from 0 to 9 (+9, more than 25% of cluster demo capacity 16 nvidia.com/gpu)",
        "guarantee rises from 0 to 5 (+5, more than 25% of cluster demo capacity 16 "
        "nvidia.com/gpu)",
    ]


def test_a_change_for_another_cluster_is_a_programming_error():
    wrong = PlanChange("other", "team-a-training", GPU, D(1), D(1), None, None)
    with pytest.raises(ValueError, match="other"):
        check_change(cluster=cluster_facts(), allocations=[], changes=[wrong])


# --------------------------------------------------------------------------------------------
# 7. Warning: guarantee below the typical daily peak


def test_guarantee_below_80_percent_of_the_typical_peak_is_a_warning():
    usage = [UsageFacts("demo", "team-b-inference", GPU, D(6))]
    findings = check_change(
        cluster=cluster_facts(),
        allocations=CLEAN_PLAN,
        changes=[change(TEAM_B, 4, 6, 2)],
        usage=usage,
    )
    assert findings == [
        Finding(
            WARNING,
            "guarantee_below_peak",
            "guarantee",
            "guarantee 4 is below 80% of team-b-inference's typical daily peak 6 nvidia.com/gpu "
            "last month (4.8)",
            "demo",
            "team-b-inference",
            GPU,
        )
    ]
    assert not has_errors(findings)


def test_guarantee_at_80_percent_of_the_peak_is_fine_and_other_usage_is_ignored():
    usage = [
        UsageFacts("demo", "team-b-inference", GPU, D(5)),  # 80% is 4
        UsageFacts("demo", "team-a-training", GPU, D(100)),  # not changed
        UsageFacts("other", "team-b-inference", GPU, D(100)),  # another cluster
    ]
    findings = check_change(
        cluster=cluster_facts(),
        allocations=CLEAN_PLAN,
        changes=[change(TEAM_B, 4, 6, 2)],
        usage=usage,
    )
    assert findings == []


def test_check_plan_reports_guarantees_below_the_peak():
    usage = [UsageFacts("demo", "team-c-dev", GPU, D(3))]
    findings = check_plan(cluster=cluster_facts(), allocations=CLEAN_PLAN, usage=usage)
    assert rules_of(findings) == [(WARNING, "guarantee_below_peak")]
    assert findings[0].namespace == "team-c-dev"


# --------------------------------------------------------------------------------------------
# 8. Warning: large jump


def test_cap_more_than_doubling_is_a_large_jump():
    small = alloc("team-c-dev", 1, 4)
    cluster = cluster_facts(capacity=32)
    findings = check_change(
        cluster=cluster, allocations=[TEAM_A, TEAM_B, small], changes=[change(small, 1, 12)]
    )
    assert findings == [
        Finding(
            WARNING, "large_jump", "cap", "cap rises from 4 to 12 (×3)", "demo", "team-c-dev", GPU
        )
    ]


def test_guarantee_and_cap_jumps_are_reported_separately_with_rounded_factors():
    small = alloc("team-c-dev", 1, 3)
    findings = check_change(
        cluster=cluster_facts(capacity=100),
        allocations=[small],
        changes=[change(small, 3, 10)],
        jump_factor=D("1.5"),
    )
    assert [(f.field, f.message) for f in findings] == [
        ("cap", "cap rises from 3 to 10 (×3.3)"),
        ("guarantee", "guarantee rises from 1 to 3 (×3)"),
    ]


def test_exactly_the_jump_factor_is_not_a_jump():
    findings = check_change(
        cluster=cluster_facts(), allocations=CLEAN_PLAN, changes=[change(TEAM_C, 2, 8)]
    )
    assert findings == []


def test_an_increase_above_a_quarter_of_the_cluster_is_a_large_jump():
    # 4 -> 9 is ×2.25 with factor 3: not a factor jump, but +5 is more than 25% of 16.
    findings = check_change(
        cluster=cluster_facts(share="1"),
        allocations=CLEAN_PLAN,
        changes=[change(TEAM_C, 2, 9)],
        jump_factor=D(3),
    )
    assert only(findings, "large_jump").message == (
        "cap rises from 4 to 9 (+5, more than 25% of cluster demo capacity 16 nvidia.com/gpu)"
    )


def test_decreases_are_never_jumps():
    findings = check_change(
        cluster=cluster_facts(), allocations=CLEAN_PLAN, changes=[change(TEAM_A, 1, 1)]
    )
    assert findings == []


# --------------------------------------------------------------------------------------------
# Ordering


def test_findings_are_ordered_errors_first_then_by_namespace_and_resource():
    usage = [UsageFacts("demo", "team-b-inference", GPU, D(20))]
    findings = check_change(
        cluster=cluster_facts(),
        allocations=CLEAN_PLAN,
        changes=[
            change(TEAM_C, 2, 9),  # cap share error + jump warning
            change(TEAM_B, 4, 6, 7),  # per-pod max error + below-peak warning
            change(TEAM_A, 11, 8, 4),  # guarantee > cap, capacity sum (17 > 16), jump
        ],
        usage=usage,
    )
    assert [(f.level, f.namespace, f.rule) for f in findings] == [
        (ERROR, "", "guarantees_le_capacity"),
        (ERROR, "team-a-training", "guarantee_le_cap"),
        (ERROR, "team-b-inference", "per_pod_max_le_cap"),
        (ERROR, "team-c-dev", "cap_le_share"),
        (WARNING, "team-a-training", "large_jump"),
        (WARNING, "team-b-inference", "guarantee_below_peak"),
        (WARNING, "team-c-dev", "large_jump"),
    ]
    # The same input in another order gives the same findings.
    again = check_change(
        cluster=cluster_facts(),
        allocations=list(reversed(CLEAN_PLAN)),
        changes=[change(TEAM_A, 11, 8, 4), change(TEAM_B, 4, 6, 7), change(TEAM_C, 2, 9)],
        usage=usage,
    )
    assert again == findings
