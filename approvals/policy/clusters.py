"""The clusters' approval policies: editing them (audited), and asking them about a request.

The decision itself is pure (approvals.policy.rules.decide_policy); this module reads what it is
asked with: each cluster's policy, every line's change, the increase the team got
automatically within the period (the auto-approval budget) and the requests waiting for an
admin that an automatic approval would block.
"""

from collections.abc import Iterable
from datetime import timedelta
from decimal import Decimal

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_noop

from approvals.access import require_platform_admin
from approvals.locks import lock_approval_policy
from approvals.models import ApprovalPolicy, QuotaRequest, RequestLine
from approvals.policy.rules import (
    LineDelta,
    PolicyDecision,
    PolicyFacts,
    decide_policy,
    hold_for_waiting,
)
from approvals.transitions import S
from approvals.validation import requests_fit_problems
from common.amounts import format_amount
from quotas.audit.chain import audit_record
from quotas.models import PriorityClass
from quotas.texts import Text


def policy_facts(cluster_ids: Iterable[int]) -> dict[str, PolicyFacts]:
    return {
        p.cluster.name: PolicyFacts(
            auto_approve_decreases=p.auto_approve_decreases,
            auto_approve_increase_max=p.auto_approve_increase_max,
            two_admins_above=p.two_admins_above,
            auto_approve_budget=p.auto_approve_budget,
            auto_approve_period_days=p.auto_approve_period_days,
            two_admins_for_higher_class=p.two_admins_for_higher_class,
        )
        for p in ApprovalPolicy.objects.filter(cluster_id__in=set(cluster_ids)).select_related(
            "cluster"
        )
    }


def line_deltas(lines: list[RequestLine]) -> list[LineDelta]:
    """Every field of every line, from the allocation as it is to the final values."""
    class_values = dict(PriorityClass.objects.values_list("name", "value"))
    return [
        LineDelta(
            cluster=line.team_namespace.cluster.name,
            guarantee_before=line.current_guarantee,
            guarantee_after=line.final_guarantee,
            cap_before=line.current_cap,
            cap_after=line.final_cap,
            per_pod_max_before=line.current_per_pod_max,
            per_pod_max_after=line.final_per_pod_max,
            classes_before=frozenset(line.current_priority_classes),
            classes_after=frozenset(line.final_priority_classes),
            where=f"{line.team_namespace.name} {line.resource.name}",
            class_values=class_values,
        )
        for line in lines
    ]


def auto_approved_recently(
    request: QuotaRequest, clusters: dict[int, str], policies: dict[str, PolicyFacts]
) -> dict[str, Decimal]:
    """Per cluster, the increase the team got automatically within the policy's period."""
    used: dict[str, Decimal] = {}
    now = timezone.now()
    for cluster_id, name in clusters.items():
        days = policies.get(name, PolicyFacts()).auto_approve_period_days
        lines = RequestLine.objects.filter(
            request__team=request.team,
            request__auto_approved=True,
            request__decided_at__gte=now - timedelta(days=days),
            team_namespace__cluster_id=cluster_id,
        ).exclude(request=request)
        used[name] = sum(
            (
                max(
                    Decimal(0),
                    line.final_guarantee - line.current_guarantee,
                    line.final_cap - line.current_cap,
                )
                for line in lines
            ),
            Decimal(0),
        )
    return used


def waiting_it_would_block(request: QuotaRequest, lines: list[RequestLine]) -> list[str]:
    """Requests waiting for an admin that fit now and would not once this one is applied."""
    raising = [line for line in lines if line.final_guarantee > line.current_guarantee]
    if not raising:
        return []  # only a higher guarantee takes capacity from others
    touching = Q()
    for line in raising:
        touching |= Q(
            lines__team_namespace__cluster_id=line.team_namespace.cluster_id,
            lines__resource_id=line.resource_id,
        )
    waiting = list(
        QuotaRequest.objects.filter(touching, status=S.SUBMITTED)
        .exclude(pk=request.pk)
        .distinct()
        .order_by("id")
    )
    if not waiting:
        return []
    now = requests_fit_problems(waiting)
    fitting = [w for w in waiting if not now[w.pk]]
    after = requests_fit_problems(fitting, assuming=lines)
    return [
        Text.of(
            gettext_noop("request #%(id)s (waiting for an admin) unable to fit: %(problem)s"),
            id=w.pk,
            problem=after[w.pk][0].text or after[w.pk][0].message,
        )
        for w in fitting
        if after[w.pk]
    ]


def policy_decision(
    request: QuotaRequest, lines: list[RequestLine], *, has_errors: bool, auto: bool = True
):
    """Who must decide, on the lines' final values. With ``auto``, also whether it may be
    approved automatically now (the team's budget, the requests waiting for an admin)."""
    if request.is_extension:
        return _extension_decision(request, has_errors=has_errors)
    clusters = {line.team_namespace.cluster_id: line.team_namespace.cluster.name for line in lines}
    policies = policy_facts(clusters)
    deltas = line_deltas(lines)
    if not auto:
        return decide_policy(deltas, policies, plan_has_errors=has_errors)
    decision = decide_policy(
        deltas,
        policies,
        plan_has_errors=has_errors,
        budget_used=auto_approved_recently(request, clusters, policies),
        team=request.team.slug,
    )
    if decision.auto_approve:
        decision = hold_for_waiting(decision, waiting_it_would_block(request, lines))
    return decision


def _extension_decision(request: QuotaRequest, *, has_errors: bool) -> PolicyDecision:
    """An extension keeps the grant's change for longer: the admins its change needs decide
    (one, or two above the threshold), never the policy alone (its increase was counted
    against the budget when the grant was approved, for the time it asked for)."""
    grant_lines = list(
        RequestLine.objects.filter(request_id=request.extends_id)
        .select_related("team_namespace__cluster", "resource")
        .order_by("id")
    )
    clusters = {li.team_namespace.cluster_id: li.team_namespace.cluster.name for li in grant_lines}
    grant = decide_policy(
        line_deltas(grant_lines), policy_facts(clusters), plan_has_errors=has_errors
    )
    return PolicyDecision(
        False,
        max(grant.approvals_needed, 1),
        Text.of(
            gettext_noop("extends temporary grant #%(grant)s: %(reason)s"),
            grant=request.extends_id,
            reason=grant.text
            if grant.approvals_needed > 1
            else Text.of(gettext_noop("one platform admin must approve")),
        ),
    )


# --- editing a policy ----------------------------------------------------------------------


def approval_policy_save(*, policy: ApprovalPolicy, acting_user: User) -> ApprovalPolicy:
    """Create or change a cluster's approval policy (e.g. from the Django admin), audited."""
    require_platform_admin(acting_user)
    fields = [f.name for f in ApprovalPolicy._meta.concrete_fields if not f.primary_key]

    def shown(value):
        return format_amount(value) if isinstance(value, Decimal) else value

    def state(obj: ApprovalPolicy) -> dict:
        return {
            name: shown(getattr(obj, "cluster_id" if name == "cluster" else name))
            for name in fields
        }

    with transaction.atomic():
        before = None
        if policy.pk:
            old = lock_approval_policy(policy.pk)
            before = state(old)
        policy.full_clean()
        policy.save()
        after = state(policy)
        if before != after:
            audit_record(
                acting_user=acting_user,
                action="approval_policy.changed",
                target=policy,
                before=before,
                after=after,
            )
    return policy
