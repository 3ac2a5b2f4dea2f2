"""Actions on quota requests: create, revise, submit, approve, reject, ask for changes,
withdraw, rebase, revoke, delete drafts; applying approved changes; following their syncs;
ending temporary grants; approval policy edits.

Each action checks who may do it, then makes one complete change in one transaction: the
request, its lines, allocation versions, the pending syncs (outbox) and the audit events.
Syncs and notifications start only after the commit.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from enum import Enum

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from approvals import notify
from approvals.models import Approval, ApprovalPolicy, QuotaRequest, RequestLine
from approvals.policy import LineDelta, PolicyFacts, decide_policy, hold_for_waiting
from approvals.selectors import (
    allocation_values_now,
    line_base_values,
    may_request_for,
    request_base_changes,
    request_may,
)
from approvals.transitions import S, check_transition, lock_request, transition
from approvals.validation import findings_json, requests_fit_problems, validate_lines
from portal.errors import NotAllowed, PermissionDenied, ValidationFailed
from quotas.audit import audit_record
from quotas.kube.usage import team_usage_now
from quotas.models import (
    Allocation,
    Cluster,
    ClusterCapacity,
    PriorityClass,
    Resource,
    Suggestion,
    SyncRequest,
    Team,
    TeamMembership,
    TeamNamespace,
)
from quotas.roles import is_platform_admin
from quotas.services import (
    allocation_set,
    allocation_values_check,
    amount_text,
    cluster_sync_request,
)

EXPIRY_WARNING = timedelta(days=1)


class Keep(Enum):
    """A field left out: keep the value it has (the allocation's, or what was requested).
    Removing a per-pod max or the class restriction is explicit: None, or no classes."""

    KEEP = "keep"


KEEP = Keep.KEEP


@dataclass(frozen=True)
class LineInput:
    team_namespace_id: int
    resource_id: int
    guarantee: object
    cap: object
    per_pod_max: object | Keep | None = KEEP
    priority_classes: tuple[str, ...] | Keep = KEEP


@dataclass(frozen=True)
class Decision:
    """An admin's modified amount for one line (approving less, or more, than asked).
    Per-pod max and classes left out (KEEP, or None for classes) stay as requested."""

    line_id: int
    guarantee: object
    cap: object
    per_pod_max: object | Keep | None = KEEP
    priority_classes: tuple[str, ...] | Keep | None = None


# --- who may do what ----------------------------------------------------------------------


def _may_request_for(user: User, team: Team) -> bool:
    return may_request_for(user, team.pk)


def _require_requester(user: User, request: QuotaRequest) -> None:
    # The same answer the request page asks to show its Edit and Submit buttons.
    if not request_may(user, request, "edit"):
        raise PermissionDenied(
            f"only the requester or a lead of {request.team.slug} may do this", field="request"
        )


def _require_admin(user: User) -> None:
    if not is_platform_admin(user):
        raise PermissionDenied("only platform admins decide quota requests")


# --- building requests --------------------------------------------------------------------


def _check_dates(kind: str, starts_at: datetime | None, ends_at: datetime | None) -> None:
    if kind not in QuotaRequest.Kind.values:
        raise ValidationFailed(f"kind must be permanent or temporary, got {kind!r}", field="kind")
    if kind == QuotaRequest.Kind.TEMPORARY:
        if ends_at is None:
            raise ValidationFailed("a temporary request needs an end (ends_at)", field="ends_at")
        if ends_at <= timezone.now():
            raise ValidationFailed("ends_at must be in the future", field="ends_at")
        if starts_at is not None and ends_at <= starts_at:
            raise ValidationFailed("ends_at must come after starts_at", field="ends_at")
        _check_grant_bounds(starts_at, ends_at)
    elif ends_at is not None:
        raise ValidationFailed(
            "a permanent request has no end; use kind temporary", field="ends_at"
        )


def _priority_classes_check(
    names: Iterable[str], *, where: str, allowed_now: Iterable[str] = ()
) -> list[str]:
    """Known class names, sorted and once each; an unknown name is refused, naming the field.
    Names the allocation allows already pass, so a stale one never blocks other changes."""
    names = sorted(set(names))
    known = set(PriorityClass.objects.filter(name__in=names).values_list("name", flat=True))
    known |= set(allowed_now)
    unknown = [n for n in names if n not in known]
    if unknown:
        every = ", ".join(PriorityClass.objects.order_by("-value").values_list("name", flat=True))
        raise ValidationFailed(
            f"{where}.priority_classes: unknown priority class "
            f"{', '.join(repr(n) for n in unknown)} (known: {every or 'none'})",
            field=f"{where}.priority_classes",
        )
    return names


def _check_grant_bounds(starts_at: datetime | None, ends_at: datetime) -> None:
    """A grant far ahead, or very long, blocks capacity for everyone: both are bounded
    (settings TEMPORARY_GRANT_MAX_START_DAYS and TEMPORARY_GRANT_MAX_DAYS)."""
    now = timezone.now()
    lead_days = settings.TEMPORARY_GRANT_MAX_START_DAYS
    if starts_at is not None and starts_at > now + timedelta(days=lead_days):
        raise ValidationFailed(
            f"starts_at: a temporary grant starts at most {lead_days} days ahead "
            f"(latest {(now + timedelta(days=lead_days)):%Y-%m-%d %H:%M} UTC)",
            field="starts_at",
        )
    max_days = settings.TEMPORARY_GRANT_MAX_DAYS
    start = max(starts_at or now, now)
    if ends_at - start > timedelta(days=max_days):
        raise ValidationFailed(
            f"ends_at: a temporary grant lasts at most {max_days} days "
            f"(asked for {(ends_at - start).total_seconds() / 86400:.1f} days from its start)",
            field="ends_at",
        )


def _build_lines(request: QuotaRequest, lines: Iterable[LineInput]) -> None:
    lines = list(lines)
    if not lines:
        raise ValidationFailed("a request needs at least one line", field="lines")
    seen = set()
    for index, item in enumerate(lines):
        where = f"lines[{index}]"
        ns = (
            TeamNamespace.objects.select_related("cluster")
            .filter(pk=item.team_namespace_id)
            .first()
        )
        if ns is None or ns.team_id != request.team_id:
            raise ValidationFailed(
                f"{where}.team_namespace: namespace {item.team_namespace_id} does not belong to "
                f"team {request.team.slug}",
                field=f"{where}.team_namespace",
            )
        resource = Resource.objects.filter(pk=item.resource_id).first()
        if resource is None:
            raise ValidationFailed(
                f"{where}.resource: unknown resource {item.resource_id}", field=f"{where}.resource"
            )
        if (ns.pk, resource.pk) in seen:
            raise ValidationFailed(
                f"{where}: {ns.name} {resource.name} appears twice", field=f"{where}.resource"
            )
        seen.add((ns.pk, resource.pk))
        current = Allocation.objects.filter(team_namespace=ns, resource=resource).first()
        # Left out means unchanged: only an explicit None / no classes removes them.
        per_pod_max = item.per_pod_max
        if per_pod_max is KEEP:
            per_pod_max = current.per_pod_max if current else None
        classes = item.priority_classes
        if classes is KEEP:
            classes = current.priority_classes if current else []
        classes = _priority_classes_check(
            classes, where=where, allowed_now=current.priority_classes if current else ()
        )
        try:
            guarantee, cap, per_pod = allocation_values_check(
                guarantee=item.guarantee, cap=item.cap, per_pod_max=per_pod_max, resource=resource
            )
        except ValidationFailed as exc:
            raise ValidationFailed(
                f"{where}.{exc.field}: {exc.message}", field=f"{where}.{exc.field}"
            ) from None
        RequestLine.objects.create(
            request=request,
            team_namespace=ns,
            resource=resource,
            current_guarantee=current.guarantee if current else Decimal(0),
            current_cap=current.cap if current else Decimal(0),
            current_per_pod_max=current.per_pod_max if current else None,
            current_priority_classes=list(current.priority_classes) if current else [],
            current_version=current.version if current else None,
            base_version=current.version if current else None,
            requested_guarantee=guarantee,
            requested_cap=cap,
            requested_per_pod_max=per_pod,
            requested_priority_classes=classes,
        )


def request_create(
    *,
    team: Team,
    acting_user: User,
    justification: str,
    lines: Iterable[LineInput],
    kind: str = QuotaRequest.Kind.PERMANENT,
    starts_at: datetime | None = None,
    ends_at: datetime | None = None,
    submit: bool = False,
    suggestion: Suggestion | None = None,
) -> QuotaRequest:
    """A draft request of a team (team leads for their own teams; platform admins for any).

    With submit, the draft is submitted in the same transaction: a refused submit leaves
    nothing behind (no draft piles up from a failed attempt). A request made from a
    ``suggestion`` is refused while another one made from it is open or applied.
    """
    if not _may_request_for(acting_user, team):
        raise PermissionDenied(
            f"only leads of {team.slug} (or platform admins) may request quota for it",
            field="team",
        )
    if not justification.strip():
        raise ValidationFailed("justification must not be empty", field="justification")
    _check_dates(kind, starts_at, ends_at)
    lines = list(lines)
    usage_now = team_usage_now(team) if submit else None  # no network call under a lock
    with transaction.atomic():
        if suggestion is not None:
            _refuse_second_request_from(suggestion)
        if submit:
            # The capacity rows before the lines read the allocations (their base): an approval
            # landing in between made the new request "stale" and refused the whole create.
            _lock_capacity_pairs(_capacity_pairs_of(lines))
        request = QuotaRequest.objects.create(
            team=team,
            requested_by=acting_user,
            justification=justification.strip(),
            kind=kind,
            starts_at=starts_at,
            ends_at=ends_at,
            suggestion=suggestion,
        )
        _build_lines(request, lines)
        if submit:
            _lock_for_submit(request)
        audit_record(
            acting_user=acting_user,
            action="request.draft",
            target=request,
            after={"status": S.DRAFT, "lines": _lines_json(request)},
        )
        if submit:
            request = request_submit(request=request, acting_user=acting_user, usage_now=usage_now)
    return request


# A request made from a suggestion that ended in one of these leaves the suggestion open.
_SUGGESTION_REUSABLE = (S.REJECTED, S.WITHDRAWN, S.REVOKED)


def _refuse_second_request_from(suggestion: Suggestion) -> None:
    """Locks the suggestion (first in the lock order) so two clicks at once make one request."""
    Suggestion.objects.select_for_update().filter(pk=suggestion.pk).first()
    earlier = (
        QuotaRequest.objects.filter(suggestion=suggestion)
        .exclude(status__in=_SUGGESTION_REUSABLE)
        .order_by("pk")
        .first()
    )
    if earlier is not None:
        raise NotAllowed(
            f"suggestion: already requested as #{earlier.pk} ({earlier.get_status_display()})",
            field="suggestion",
            extra={"request": earlier.pk, "request_status": earlier.status},
        )


def _lock_for_submit(request: QuotaRequest) -> None:
    """The locks of a submit, in their order, taken before the first audit write (the audit
    chain head must stay the last lock) when a submit follows in the same transaction."""
    _lock_capacity(request)
    lock_request(request.pk)
    _lock_allocations(request)


def request_revise(
    *,
    request: QuotaRequest,
    acting_user: User,
    lines: Iterable[LineInput],
    justification: str | None = None,
    submit: bool = False,
    usage_now: dict | None = None,
) -> QuotaRequest:
    """Replace the lines of a draft, or of a request sent back for changes.

    With submit, revise and submit are one transaction: a refused submit keeps the request
    as it was before the revision. A caller holding a transaction reads ``usage_now``
    (``team_usage_now``) before it, so no cluster is called under a row lock.
    """
    _require_requester(acting_user, request)
    lines = list(lines)
    if submit and usage_now is None:
        usage_now = team_usage_now(request.team)
    with transaction.atomic():
        if submit:
            # The lock order of every decision: capacity rows (of the old lines and the new
            # ones) before the request row, or a revise-and-submit and an approval deadlock.
            namespace_clusters = dict(
                TeamNamespace.objects.filter(
                    pk__in={line.team_namespace_id for line in lines}
                ).values_list("pk", "cluster_id")
            )
            _lock_capacity_pairs(
                set(request.lines.values_list("team_namespace__cluster_id", "resource_id"))
                | {
                    (namespace_clusters[line.team_namespace_id], line.resource_id)
                    for line in lines
                    if line.team_namespace_id in namespace_clusters
                }
            )
        request = lock_request(request.pk)
        if request.status not in (S.DRAFT, S.CHANGES_REQUESTED):
            check_transition(request, S.SUBMITTED)  # raises the clear not-allowed error
        before = _lines_json(request)
        request.lines.all().delete()
        _build_lines(request, lines)
        if submit:
            _lock_for_submit(request)
        if justification is not None:
            if not justification.strip():
                raise ValidationFailed("justification must not be empty", field="justification")
            request.justification = justification.strip()
            request.save(update_fields=["justification", "updated_at"])
        audit_record(
            acting_user=acting_user,
            action="request.revised",
            target=request,
            before={"lines": before},
            after={"lines": _lines_json(request)},
        )
        if submit:
            request = request_submit(request=request, acting_user=acting_user, usage_now=usage_now)
    return request


# --- submitting and deciding ------------------------------------------------------------------


def _lines(request: QuotaRequest) -> list[RequestLine]:
    return list(request.lines.select_related("team_namespace__cluster", "resource").order_by("id"))


def _lines_json(request: QuotaRequest) -> list[dict]:
    amount = amount_text
    return [
        {
            "namespace": line.team_namespace.name,
            "cluster": line.team_namespace.cluster.name,
            "resource": line.resource.name,
            "current": {
                "guarantee": amount(line.current_guarantee),
                "cap": amount(line.current_cap),
                "per_pod_max": amount(line.current_per_pod_max),
                "priority_classes": list(line.current_priority_classes),
            },
            "requested": {
                "guarantee": amount(line.requested_guarantee),
                "cap": amount(line.requested_cap),
                "per_pod_max": amount(line.requested_per_pod_max),
                "priority_classes": list(line.requested_priority_classes),
            },
            "decided": None
            if line.decided_cap is None
            else {
                "guarantee": amount(line.decided_guarantee),
                "cap": amount(line.decided_cap),
                "per_pod_max": amount(line.decided_per_pod_max),
                "priority_classes": line.final_priority_classes,
            },
        }
        for line in _lines(request)
    ]


def _refresh_current(request: QuotaRequest) -> None:
    """The allocation as it is when the request is submitted (kept side by side)."""
    for line in _lines(request):
        current = Allocation.objects.filter(
            team_namespace=line.team_namespace, resource=line.resource
        ).first()
        line.current_guarantee = current.guarantee if current else Decimal(0)
        line.current_cap = current.cap if current else Decimal(0)
        line.current_per_pod_max = current.per_pod_max if current else None
        line.current_priority_classes = list(current.priority_classes) if current else []
        line.current_version = current.version if current else None
        line.save()


def _usage_snapshot(request: QuotaRequest, usage_now: dict) -> dict:
    """The team's allocations at submission, and what its pods used then."""
    allocations = Allocation.objects.filter(team_namespace__team=request.team).select_related(
        "team_namespace__cluster", "resource"
    )
    return {
        "taken_at": timezone.now().isoformat(),
        "usage": usage_now,
        "allocations": [
            {
                "cluster": a.team_namespace.cluster.name,
                "namespace": a.team_namespace.name,
                "resource": a.resource.name,
                "guarantee": amount_text(a.guarantee),
                "cap": amount_text(a.cap),
            }
            for a in allocations
        ],
    }


def _raise_on_errors(findings) -> None:
    errors = [f for f in findings if f.is_error]
    if errors:
        raise ValidationFailed(
            errors[0].message,
            field=errors[0].field,
            extra={
                "errors": findings_json(errors),
                "warnings": findings_json([f for f in findings if not f.is_error]),
            },
        )


def _policy_facts(cluster_ids: Iterable[int]) -> dict[str, PolicyFacts]:
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


def _deltas(lines: list[RequestLine]) -> list[LineDelta]:
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


def _auto_approved_recently(
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


def _waiting_it_would_block(request: QuotaRequest, lines: list[RequestLine]) -> list[str]:
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
        f"request #{w.pk} (waiting for an admin) unable to fit: {after[w.pk][0].message}"
        for w in fitting
        if after[w.pk]
    ]


def _policy_decision(
    request: QuotaRequest, lines: list[RequestLine], *, has_errors: bool, auto: bool = True
):
    """Who must decide, on the lines' final values. With ``auto``, also whether it may be
    approved automatically now (the team's budget, the requests waiting for an admin)."""
    clusters = {line.team_namespace.cluster_id: line.team_namespace.cluster.name for line in lines}
    policies = _policy_facts(clusters)
    deltas = _deltas(lines)
    if not auto:
        return decide_policy(deltas, policies, plan_has_errors=has_errors)
    decision = decide_policy(
        deltas,
        policies,
        plan_has_errors=has_errors,
        budget_used=_auto_approved_recently(request, clusters, policies),
        team=request.team.slug,
    )
    if decision.auto_approve:
        decision = hold_for_waiting(decision, _waiting_it_would_block(request, lines))
    return decision


def request_submit(
    *, request: QuotaRequest, acting_user: User, usage_now: dict | None = None
) -> QuotaRequest:
    """Validate against the whole plan and submit; what policy allows is approved at once."""
    _require_requester(acting_user, request)
    # Read from the clusters before the transaction: no network call holds a row lock.
    if usage_now is None:
        usage_now = team_usage_now(request.team)
    with transaction.atomic():
        _lock_capacity(request)
        request = lock_request(request.pk)
        check_transition(request, S.SUBMITTED)
        _lock_allocations(request)  # auto-approval may apply at once
        _refuse_stale(request)
        _refresh_current(request)
        lines = _lines(request)
        _refuse_removed_classes(lines)
        findings = validate_lines(lines, final=False, exclude_request_id=request.pk)
        _raise_on_errors(findings)
        decision = _policy_decision(request, lines, has_errors=False)
        request.findings = findings_json(findings)
        request.usage_snapshot = _usage_snapshot(request, usage_now)
        request.approvals_needed = max(decision.approvals_needed, 1)
        request.policy_reason = decision.reason
        request.save(
            update_fields=["findings", "usage_snapshot", "approvals_needed", "policy_reason"]
        )
        transition(
            request,
            S.SUBMITTED,
            acting_user=acting_user,
            extra={"warnings": [f["message"] for f in request.findings], "policy": decision.reason},
        )
        if decision.auto_approve:
            request.auto_approved = True
            request.save(update_fields=["auto_approved"])
            _approve_final(request, lines, acting_user=None, comment=decision.reason)
        else:
            _notify(request, "request.submitted")
    return request


def _lock_capacity(request: QuotaRequest) -> None:
    """First lock of every decision: the capacity rows the request draws on, in id order.

    Every path that changes allocations of a request locks these before the request row,
    so two admins approving competing requests serialize instead of both seeing free GPUs.
    """
    _lock_capacity_pairs(
        set(request.lines.values_list("team_namespace__cluster_id", "resource_id"))
    )


def _capacity_pairs_of(lines: list[LineInput]) -> set[tuple[int, int]]:
    """(cluster id, resource id) of lines not built yet (unknown namespaces left out)."""
    clusters = dict(
        TeamNamespace.objects.filter(pk__in={line.team_namespace_id for line in lines}).values_list(
            "pk", "cluster_id"
        )
    )
    return {
        (clusters[line.team_namespace_id], line.resource_id)
        for line in lines
        if line.team_namespace_id in clusters
    }


def _lock_capacity_pairs(pairs: set[tuple[int, int]]) -> None:
    """Lock the capacity rows of (cluster id, resource id) pairs, in id order."""
    if not pairs:
        return
    query = ClusterCapacity.objects.none()
    for cluster_id, resource_id in sorted(pairs):
        query |= ClusterCapacity.objects.filter(cluster_id=cluster_id, resource_id=resource_id)
    list(query.select_for_update().order_by("id").values_list("id", flat=True))


def request_lock(*, request: QuotaRequest, for_approval: bool = False) -> QuotaRequest:
    """The request row locked in the services' lock order (the capacity rows first when it may
    be approved), for a caller that checks a precondition (the API's If-Match) and then calls
    a service in the same transaction."""
    if for_approval:
        _lock_capacity(request)
    return lock_request(request.pk)


def _lock_allocations(request: QuotaRequest) -> None:
    """After the capacity rows and the request: the allocations and clusters the request
    changes, in id order, so the audit chain head (taken by every audit write) is always the
    last lock of the transaction and no two paths wait on each other in a circle."""
    lines = list(request.lines.values_list("team_namespace_id", "resource_id"))
    if not lines:
        return
    query = Allocation.objects.none()
    for ns_id, resource_id in lines:
        query |= Allocation.objects.filter(team_namespace_id=ns_id, resource_id=resource_id)
    list(query.select_for_update().order_by("id").values_list("id", flat=True))
    cluster_ids = request.lines.values_list("team_namespace__cluster_id", flat=True)
    list(
        Cluster.objects.select_for_update()
        .filter(id__in=list(cluster_ids))
        .order_by("id")
        .values_list("id", flat=True)
    )


def _final_values(line: RequestLine) -> tuple:
    return (
        line.final_guarantee,
        line.final_cap,
        line.final_per_pod_max,
        sorted(line.final_priority_classes),
    )


def _apply_decisions(request: QuotaRequest, decisions: Iterable[Decision]) -> bool:
    """Record the decided values; True when they change what would be applied."""
    by_id = {line.pk: line for line in _lines(request)}
    changed = False
    for index, decision in enumerate(decisions):
        where = f"decisions[{index}]"
        line = by_id.get(decision.line_id)
        if line is None:
            raise ValidationFailed(
                f"{where}.line_id: line {decision.line_id} is not part of request #{request.pk}",
                field=f"{where}.line_id",
            )
        before = _final_values(line)
        per_pod_max = decision.per_pod_max
        if per_pod_max is KEEP:
            per_pod_max = line.final_per_pod_max
        classes = decision.priority_classes
        if classes is None or classes is KEEP:
            classes = line.final_priority_classes
        classes = _priority_classes_check(
            classes, where=where, allowed_now=line.current_priority_classes
        )
        try:
            g, c, p = allocation_values_check(
                guarantee=decision.guarantee,
                cap=decision.cap,
                per_pod_max=per_pod_max,
                resource=line.resource,
            )
        except ValidationFailed as exc:
            raise ValidationFailed(
                f"{where}.{exc.field}: {exc.message}", field=f"{where}.{exc.field}"
            ) from None
        line.decided_guarantee, line.decided_cap, line.decided_per_pod_max = g, c, p
        line.decided_priority_classes = classes
        line.save()
        changed = changed or _final_values(line) != before
    return changed


def request_approve(
    *,
    request: QuotaRequest,
    acting_user: User,
    comment: str = "",
    decisions: Iterable[Decision] = (),
) -> QuotaRequest:
    """One admin's approval; the last one needed applies the change.

    Locks the capacity rows, then the request, and validates the decided values again inside
    the lock, so concurrent approvals never promise the same free GPUs twice.
    """
    _require_admin(acting_user)
    if request.requested_by_id == acting_user.pk:
        raise PermissionDenied("nobody approves their own request", field="request")
    with transaction.atomic():
        _lock_capacity(request)
        request = lock_request(request.pk)
        check_transition(request, S.APPROVED)
        _lock_allocations(request)
        _refuse_stale(request)
        _refuse_removed_classes(_lines(request))
        if request.approvals.filter(admin=acting_user).exists():
            raise PermissionDenied(
                f"{acting_user.username} approved request #{request.pk} already; "
                "a second admin must approve",
                field="request",
            )
        decisions = list(decisions)
        dropped: list[str] = []
        policy_reason = ""
        if decisions:
            if _apply_decisions(request, decisions):
                # Earlier approvals were given to other values: they no longer count.
                earlier = request.approvals.exclude(admin=acting_user)
                dropped = list(earlier.values_list("admin__username", flat=True))
                earlier.delete()
            # The number of approvals follows the decided values, not the requested ones.
            decision = _policy_decision(request, _lines(request), has_errors=False, auto=False)
            request.approvals_needed = max(decision.approvals_needed, 1)
            request.policy_reason = policy_reason = decision.reason
        Approval.objects.create(request=request, admin=acting_user, comment=comment)
        lines = _lines(request)
        findings = validate_lines(lines, final=True, exclude_request_id=request.pk)
        _raise_on_errors(findings)
        request.findings = findings_json(findings)
        request.save(update_fields=["findings", "approvals_needed", "policy_reason"])
        given = request.approvals.count()
        if given < request.approvals_needed:
            after = {"approvals": given, "needed": request.approvals_needed}
            if policy_reason:
                after["policy"] = policy_reason
            if dropped:
                after["approvals_dropped"] = dropped
            if decisions:
                after["lines"] = _lines_json(request)
            audit_record(
                acting_user=acting_user,
                action="request.approval",
                target=request,
                after=after,
                comment=comment,
            )
            return request
        _approve_final(request, lines, acting_user=acting_user, comment=comment)
    return request


def _approve_final(
    request: QuotaRequest, lines: list[RequestLine], *, acting_user: User | None, comment: str
) -> None:
    transition(
        request,
        S.APPROVED,
        acting_user=acting_user,
        comment=comment,
        extra={"auto_approved": request.auto_approved, "lines": _lines_json(request)},
    )
    _notify(request, "request.decided")
    if request.is_temporary and request.starts_at and request.starts_at > timezone.now():
        return  # applied when it starts (requests_start_due)
    _apply(request, lines, acting_user=acting_user)


def _apply(request: QuotaRequest, lines: list[RequestLine], *, acting_user: User | None) -> None:
    """New allocation versions and the pending syncs, in the caller's transaction."""
    clusters = {}
    for line in lines:
        allocation = allocation_set(
            team_namespace=line.team_namespace,
            resource=line.resource,
            guarantee=line.final_guarantee,
            cap=line.final_cap,
            per_pod_max=line.final_per_pod_max,
            priority_classes=line.final_priority_classes,
            acting_user=acting_user,
            reason=f"request #{request.pk}: {request.justification[:200]}",
            source=f"request:{request.pk}",
        )
        line.applied_version = allocation.version
        line.save(update_fields=["applied_version"])
        clusters[line.team_namespace.cluster_id] = line.team_namespace.cluster
    for cluster in clusters.values():
        sync = cluster_sync_request(
            cluster=cluster, acting_user=acting_user, reason=f"request #{request.pk}"
        )
        request.sync_requests.add(sync)
    transition(request, S.APPLYING, acting_user=acting_user)


def request_reject(*, request: QuotaRequest, acting_user: User, comment: str) -> QuotaRequest:
    _require_admin(acting_user)
    if not comment.strip():
        raise ValidationFailed("say why the request is rejected (comment)", field="comment")
    with transaction.atomic():
        request = lock_request(request.pk)
        transition(request, S.REJECTED, acting_user=acting_user, comment=comment)
        _notify(request, "request.decided")
    return request


def request_changes(*, request: QuotaRequest, acting_user: User, comment: str) -> QuotaRequest:
    _require_admin(acting_user)
    if not comment.strip():
        raise ValidationFailed("say which changes are needed (comment)", field="comment")
    with transaction.atomic():
        request = lock_request(request.pk)
        transition(request, S.CHANGES_REQUESTED, acting_user=acting_user, comment=comment)
        request.approvals.all().delete()
        _notify(request, "request.decided")
    return request


def request_withdraw(
    *, request: QuotaRequest, acting_user: User, comment: str = ""
) -> QuotaRequest:
    if request.requested_by_id != acting_user.pk:
        raise PermissionDenied("only the requester withdraws a request", field="request")
    with transaction.atomic():
        request = lock_request(request.pk)
        was = request.status
        transition(request, S.WITHDRAWN, acting_user=acting_user, comment=comment)
        if was != S.DRAFT:  # a draft was never shown to anyone
            _notify(request, "request.withdrawn", comment=comment)
    return request


# --- lost updates: approving against a changed allocation, rebasing --------------------------


def _refuse_stale(request: QuotaRequest) -> None:
    """Refuse when an allocation the request changes moved on since the request was written
    (approving would silently undo that change); call with the allocations locked."""
    changes = request_base_changes(_lines(request))
    if not changes:
        return
    first = changes[0]
    described = "; ".join(
        f"{c['namespace']} {c['resource']} {c['field']}: {_shown(c['base'])} → "
        f"{_shown(c['current'])}"
        for c in changes
    )
    raise NotAllowed(
        f"request #{request.pk} was written against older allocations ({described}); "
        "rebase it on the current allocations first",
        field=f"lines[{first['index']}].{first['field']}",
        extra={"request": request.pk, "changes": changes},
    )


def _refuse_removed_classes(lines: list[RequestLine]) -> None:
    """A priority class removed since the request was written is not given to anyone; called
    with the clusters locked, which a removal takes before it checks (priority_class_delete)."""
    for index, line in enumerate(lines):
        _priority_classes_check(
            line.final_priority_classes,
            where=f"lines[{index}]",
            allowed_now=line.current_priority_classes,
        )


def _shown(value) -> str:
    if isinstance(value, list):
        return ", ".join(value) or "any"
    return "none" if value is None else str(value)


REBASABLE = (S.DRAFT, S.SUBMITTED, S.CHANGES_REQUESTED)


def request_rebase(*, request: QuotaRequest, acting_user: User) -> QuotaRequest:
    """Move every line's base to the allocation as it is now, in one step.

    A value the request did not change (requested = base) follows the allocation; a value it
    did change is kept. Decided values and approvals given so far are dropped (the admins
    decide on the rebased request), and a submitted request is validated and policy-checked
    again as on submit, so it may now be approved automatically, or refused.
    """
    if not is_platform_admin(acting_user):
        _require_requester(acting_user, request)
    with transaction.atomic():
        _lock_capacity(request)
        request = lock_request(request.pk)
        if request.status not in REBASABLE:
            raise NotAllowed(
                f"request #{request.pk} is {request.get_status_display()}; only drafts and "
                "requests waiting for a decision are rebased",
                field="status",
                extra={"status": request.status},
            )
        _lock_allocations(request)
        lines = _lines(request)
        if not request_base_changes(lines):
            return request  # nothing moved: already up to date
        before = _lines_json(request)
        for index, line in enumerate(lines):
            _rebase_line(line, index)
        request.approvals.all().delete()
        lines = _lines(request)
        audit_record(
            acting_user=acting_user,
            action="request.rebased",
            target=request,
            before={"status": request.status, "lines": before},
            after={"status": request.status, "lines": _lines_json(request)},
        )
        if request.status == S.SUBMITTED:
            _recheck_as_on_submit(request, lines)
    return request


def _rebase_line(line: RequestLine, index: int) -> None:
    allocation, now = allocation_values_now(line)
    base = line_base_values(line)
    requested = {
        "guarantee": line.requested_guarantee,
        "cap": line.requested_cap,
        "per_pod_max": line.requested_per_pod_max,
        "priority_classes": sorted(line.requested_priority_classes),
    }
    merged = {
        field: (now[field] if requested[field] == base[field] else requested[field])
        for field in requested
    }
    try:
        g, c, p = allocation_values_check(
            guarantee=merged["guarantee"], cap=merged["cap"], per_pod_max=merged["per_pod_max"]
        )
    except ValidationFailed as exc:
        where = f"lines[{index}]"
        raise ValidationFailed(
            f"{where}.{exc.field}: rebased on the current allocation of "
            f"{line.team_namespace.name} {line.resource.name}, the request no longer holds: "
            f"{exc.message}; withdraw it and ask again",
            field=f"{where}.{exc.field}",
        ) from None
    line.current_guarantee, line.current_cap = now["guarantee"], now["cap"]
    line.current_per_pod_max = now["per_pod_max"]
    line.current_priority_classes = list(now["priority_classes"])
    line.current_version = line.base_version = allocation.version if allocation else None
    line.requested_guarantee, line.requested_cap, line.requested_per_pod_max = g, c, p
    line.requested_priority_classes = list(merged["priority_classes"])
    line.decided_guarantee = line.decided_cap = line.decided_per_pod_max = None
    line.decided_priority_classes = None
    line.save()


def _recheck_as_on_submit(request: QuotaRequest, lines: list[RequestLine]) -> None:
    findings = validate_lines(lines, final=False, exclude_request_id=request.pk)
    _raise_on_errors(findings)
    decision = _policy_decision(request, lines, has_errors=False)
    request.findings = findings_json(findings)
    request.approvals_needed = max(decision.approvals_needed, 1)
    request.save(update_fields=["findings", "approvals_needed", "updated_at"])
    if decision.auto_approve:
        request.auto_approved = True
        request.save(update_fields=["auto_approved"])
        _approve_final(request, lines, acting_user=None, comment=decision.reason)


# --- scheduled grants: revoke; drafts: delete ----------------------------------------------


def request_revoke(*, request: QuotaRequest, acting_user: User, comment: str) -> QuotaRequest:
    """An admin takes back an approved temporary grant before it starts; its promised
    capacity is free again at once (scheduled grants count only while approved)."""
    _require_admin(acting_user)
    if not comment.strip():
        raise ValidationFailed("say why the grant is revoked (comment)", field="comment")
    with transaction.atomic():
        _lock_capacity(request)  # the same order as the start of the grant (requests_start_due)
        request = lock_request(request.pk)
        transition(request, S.REVOKED, acting_user=acting_user, comment=comment)
        _notify(request, "request.revoked")
    return request


def request_delete(*, request: QuotaRequest, acting_user: User) -> None:
    """The requester deletes a draft they no longer want; the audit log keeps what it was."""
    if request.requested_by_id != acting_user.pk:
        raise PermissionDenied("only the requester deletes a draft", field="request")
    with transaction.atomic():
        request = lock_request(request.pk)
        if request.status != S.DRAFT:
            raise NotAllowed(
                f"request #{request.pk} is {request.get_status_display()}; only drafts are "
                "deleted (withdraw it instead)",
                field="status",
                extra={"status": request.status},
            )
        audit_record(
            acting_user=acting_user,
            action="request.deleted",
            target=request,
            before={
                "status": request.status,
                "justification": request.justification,
                "lines": _lines_json(request),
            },
            after=None,
        )
        request.delete()


# --- approval policies ----------------------------------------------------------------------


def approval_policy_save(*, policy: ApprovalPolicy, acting_user: User) -> ApprovalPolicy:
    """Create or change a cluster's approval policy (e.g. from the Django admin), audited."""
    _require_admin(acting_user)
    fields = [f.name for f in ApprovalPolicy._meta.concrete_fields if not f.primary_key]

    def shown(value):
        return amount_text(value) if isinstance(value, Decimal) else value

    def state(obj: ApprovalPolicy) -> dict:
        return {
            name: shown(getattr(obj, "cluster_id" if name == "cluster" else name))
            for name in fields
        }

    with transaction.atomic():
        before = None
        if policy.pk:
            old = ApprovalPolicy.objects.select_for_update().get(pk=policy.pk)
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


# --- after approval: syncs, start and end of temporary grants -----------------------------


def requests_follow_syncs(*, request_ids: Iterable[int] | None = None) -> list[int]:
    """Move applying/failed requests on by the state of their syncs; returns those moved."""
    moving = QuotaRequest.objects.filter(status__in=[S.APPLYING, S.FAILED])
    if request_ids is not None:
        moving = moving.filter(pk__in=list(request_ids))
    moved = []
    for request_id in moving.values_list("pk", flat=True):
        with transaction.atomic():
            request = lock_request(request_id)
            if request.status not in (S.APPLYING, S.FAILED):
                continue
            states = set(request.sync_requests.values_list("status", flat=True))
            if states and states <= {SyncRequest.Status.DONE}:
                target = S.ACTIVE if request.is_temporary else S.APPLIED
                transition(request, target, acting_user=None)
                _notify(request, "request.applied")
                moved.append(request_id)
            elif SyncRequest.Status.FAILED in states and request.status == S.APPLYING:
                errors = request.sync_requests.filter(status=SyncRequest.Status.FAILED)
                error = next(iter(errors.values_list("last_error", flat=True)), "")
                transition(request, S.FAILED, acting_user=None, comment=error[:1000])
                _notify(request, "request.failed")
                moved.append(request_id)
    return moved


def _each_locked_in(status: str, request_ids, step) -> list[int]:
    """Run `step` on each request still in `status`, one transaction each, with the locks of a
    decision taken in their fixed order (capacity rows, request, allocations and clusters)."""
    done = []
    for request_id in list(request_ids):
        with transaction.atomic():
            request = QuotaRequest.objects.get(pk=request_id)
            _lock_capacity(request)
            request = lock_request(request_id)
            if request.status != status:
                continue  # moved on since it was picked
            _lock_allocations(request)
            step(request)
            done.append(request_id)
    return done


def requests_start_due(*, now: datetime | None = None) -> list[int]:
    """Start approved temporary grants whose start has come (see _start_grant)."""
    now = now or timezone.now()
    due = QuotaRequest.objects.filter(
        status=S.APPROVED, kind=QuotaRequest.Kind.TEMPORARY, starts_at__lte=now
    )
    return _each_locked_in(S.APPROVED, due.values_list("pk", flat=True), _start_grant)


class _GrantConflict(Exception):
    pass


def _three_way(base, grant, now, *, what: str):
    """The grant's value of a field if only the grant changed it, the allocation's if only
    the allocation did; both changed it differently: a conflict nobody decided."""
    if grant in (base, now):
        return now
    if now == base:
        return grant
    raise _GrantConflict(
        f"{what}: the grant sets {_shown(grant)}, the allocation was changed to {_shown(now)} "
        f"since the grant was approved (was {_shown(base)})"
    )


def _grant_on_top(line: RequestLine) -> bool:
    """Move a grant's line onto the allocation as it is at the start, in memory.

    The grant was approved as a change of the allocation at its base version. If a
    permanent change landed since, writing the grant's values would undo it (a lost update),
    and restoring its base at the end would undo it again. So the grant applies on top: its
    increase of guarantee and cap is added to the current values, a per-pod max or classes
    only the grant changes take the grant's value, and what it restores at its end is the
    allocation at the start. Returns whether the line moved; raises _GrantConflict when it
    does not hold on top.
    """
    allocation, now = allocation_values_now(line)
    version = allocation.version if allocation else None
    if version == line.base_version:
        return False
    base = line_base_values(line)
    where = f"{line.team_namespace.name} {line.resource.name}"
    guarantee = max(Decimal(0), now["guarantee"] + line.final_guarantee - base["guarantee"])
    cap = max(Decimal(0), now["cap"] + line.final_cap - base["cap"])
    per_pod_max = _three_way(
        base["per_pod_max"], line.final_per_pod_max, now["per_pod_max"], what=f"{where} per-pod max"
    )
    classes = _three_way(
        base["priority_classes"],
        sorted(line.final_priority_classes),
        now["priority_classes"],
        what=f"{where} priority classes",
    )
    try:
        g, c, p = allocation_values_check(
            guarantee=guarantee, cap=cap, per_pod_max=per_pod_max, resource=line.resource
        )
    except ValidationFailed as exc:
        raise _GrantConflict(f"{where} on top of the current allocation: {exc.message}") from None
    line.current_guarantee, line.current_cap = now["guarantee"], now["cap"]
    line.current_per_pod_max = now["per_pod_max"]
    line.current_priority_classes = list(now["priority_classes"])
    line.current_version = line.base_version = version
    line.decided_guarantee, line.decided_cap, line.decided_per_pod_max = g, c, p
    line.decided_priority_classes = list(classes)
    return True


def _start_grant(request: QuotaRequest) -> None:
    """Apply a scheduled grant, on top of the allocation as it is now; if it no longer holds
    there (or no longer fits the plan), it does not start: failed, with the reason, told."""
    lines = _lines(request)
    before = _lines_json(request)
    problem = ""
    try:
        moved = [_grant_on_top(line) for line in lines]
        _refuse_removed_classes(lines)
    except _GrantConflict as exc:
        problem, moved = str(exc), []
    except ValidationFailed as exc:
        problem, moved = exc.message, []
    if not problem:
        errors = [
            f
            for f in validate_lines(lines, final=True, exclude_request_id=request.pk)
            if f.is_error
        ]
        if errors:
            problem = "; ".join(f.message for f in errors)
    if problem:
        reason = (
            f"the grant did not start: {problem}. The allocation is left as it is; "
            "ask again if the team still needs it"
        )
        # Shown with the request (page and API) as its first finding; not retried: the
        # admins approved it against a plan that no longer holds.
        request.findings = [
            {"level": "error", "rule": "grant_start", "field": "status", "message": reason},
            *request.findings,
        ]
        request.save(update_fields=["findings"])
        transition(request, S.FAILED, acting_user=None, comment=reason[:1000])
        _notify(request, "request.failed", reason=reason)
        return
    if any(moved):
        for line in lines:
            line.save()
        audit_record(
            acting_user=None,
            action="request.rebased",
            target=request,
            before={"status": request.status, "lines": before},
            after={"status": request.status, "lines": _lines_json(request)},
            comment="the allocation changed after the grant was approved: it applies on top "
            "of the allocation as it is at its start and restores that at its end",
        )
    _apply(request, lines, acting_user=None)


def requests_notify_expiring(*, now: datetime | None = None) -> list[int]:
    """Tell teams a day before their temporary grant ends (once)."""
    now = now or timezone.now()
    told = []
    soon = QuotaRequest.objects.filter(
        status=S.ACTIVE,
        ends_at__lte=now + EXPIRY_WARNING,
        ends_at__gt=now,
        expiry_notified_at__isnull=True,
    )
    for request_id in soon.values_list("pk", flat=True):
        with transaction.atomic():
            request = lock_request(request_id)
            if request.expiry_notified_at is not None:
                continue
            request.expiry_notified_at = now
            request.save(update_fields=["expiry_notified_at"])
            _notify(request, "request.expiring")
            told.append(request_id)
    return told


def requests_expire_due(*, now: datetime | None = None) -> list[int]:
    """End temporary grants: restore the allocation as it was before, sync, mark expired."""
    now = now or timezone.now()

    def expire(request: QuotaRequest) -> None:
        notes = _revert(request)
        transition(request, S.EXPIRED, acting_user=None, comment="; ".join(notes))
        request.reverted_at = now
        request.save(update_fields=["reverted_at"])
        _notify(request, "request.expired")

    due = QuotaRequest.objects.filter(status=S.ACTIVE, ends_at__lte=now)
    return _each_locked_in(S.ACTIVE, due.values_list("pk", flat=True), expire)


def _revert(request: QuotaRequest) -> list[str]:
    """Take the grant back. If nothing changed the allocation since, restore it exactly;
    if someone changed it meanwhile, take back only the grant's own increase."""
    notes = []
    clusters = {}
    for line in _lines(request):
        allocation = (
            Allocation.objects.select_for_update()
            .filter(team_namespace=line.team_namespace, resource=line.resource)
            .first()
        )
        if allocation is None:
            continue
        if allocation.version == line.applied_version:
            g, c, p = line.current_guarantee, line.current_cap, line.current_per_pod_max
            classes = line.current_priority_classes
        else:
            g = max(
                Decimal(0), allocation.guarantee - (line.final_guarantee - line.current_guarantee)
            )
            c = max(g, allocation.cap - (line.final_cap - line.current_cap))
            p = (
                allocation.per_pod_max
                if allocation.per_pod_max is None or allocation.per_pod_max <= c
                else c
            )
            classes = allocation.priority_classes
            notes.append(
                f"{line.team_namespace.name} {line.resource.name} changed during the grant: "
                f"took back only the grant's increase"
            )
        allocation_set(
            team_namespace=line.team_namespace,
            resource=line.resource,
            guarantee=g,
            cap=c,
            per_pod_max=p,
            priority_classes=classes,
            acting_user=None,
            reason=f"temporary request #{request.pk} ended",
            source=f"request:{request.pk}:expired",
        )
        clusters[line.team_namespace.cluster_id] = line.team_namespace.cluster
    for cluster in clusters.values():
        sync = cluster_sync_request(
            cluster=cluster, acting_user=None, reason=f"request #{request.pk} expired"
        )
        request.sync_requests.add(sync)
    return notes


# --- notifications ------------------------------------------------------------------------


def request_payload(request: QuotaRequest) -> dict:
    return {
        "id": request.pk,
        "team": request.team.slug,
        "status": request.status,
        "kind": request.kind,
        "requested_by": request.requested_by.username,
        "justification": request.justification,
        "starts_at": request.starts_at.isoformat() if request.starts_at else None,
        "ends_at": request.ends_at.isoformat() if request.ends_at else None,
        "decision_comment": request.decision_comment,
        "auto_approved": request.auto_approved,
        "lines": _lines_json(request),
        "url": f"{settings.PORTAL_BASE_URL.rstrip('/')}/requests/{request.pk}/",
    }


def _recipients(request: QuotaRequest, event: str) -> list[str]:
    admins = (
        User.objects.filter(is_active=True).filter(groups__name="platform-admins")
        | User.objects.filter(is_active=True, is_superuser=True)
    ).values_list("email", flat=True)
    leads = TeamMembership.objects.filter(
        team=request.team, role=TeamMembership.Role.LEAD, user__is_active=True
    ).values_list("user__email", flat=True)
    if event == "request.submitted":
        emails = list(admins)
    elif event == "request.withdrawn":
        # The admins were asked (or gave capacity to a scheduled grant); the leads see it go.
        emails = [*admins, request.requested_by.email, *leads]
    else:
        emails = [request.requested_by.email, *leads]
    return sorted({e for e in emails if e})


def _notify(request: QuotaRequest, event: str, **extra) -> None:
    """Queued for after the commit: a rolled-back decision notifies nobody."""
    notify.notify(
        event=event,
        payload={**request_payload(request), **extra},
        recipients=_recipients(request, event),
    )
