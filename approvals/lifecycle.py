"""The life of a quota request: create, revise, submit, approve, reject, ask for changes,
withdraw, rebase, delete drafts; applying approved changes and following their syncs.
(Temporary grants start, expire and are revoked in approvals.grants.)

Each action checks who may do it, then makes one complete change in one transaction: the
request, its lines, allocation versions, the pending syncs (outbox) and the audit events,
with the row locks taken in the order approvals.locks states. Syncs and notifications start
only after the commit.
"""

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from approvals.access import may_request, require
from approvals.lines import (
    Decision,
    LineInput,
    build_lines,
    lines_json,
    ordered_lines,
    raise_on_errors,
    record_decisions,
    refresh_current,
    refuse_removed_classes,
    shown,
)
from approvals.locks import (
    lock_for_submit,
    lock_request,
    lock_request_allocations,
    lock_request_capacity,
)
from approvals.models import Approval, QuotaRequest, RequestLine
from approvals.notify import notify_request
from approvals.policy.clusters import policy_decision
from approvals.policy.rules import PolicyDecision
from approvals.selectors import allocation_values_now, line_base_values, request_base_changes
from approvals.transitions import S, transition
from approvals.validation import stored_findings, validate_lines
from common.amounts import format_amount
from common.errors import NotAllowed, ValidationFailed
from quotas.audit.chain import audit_record
from quotas.kube.live_usage import team_usage_now
from quotas.locks import lock_capacities, lock_team_budget
from quotas.models import Allocation, SyncRequest, Team, TeamNamespace
from quotas.services import allocation_set, allocation_values_check, cluster_sync_request
from usage.locks import lock_suggestion
from usage.models import Suggestion

# --- building requests --------------------------------------------------------------------

# How far in the past a start may lie: the clocks of a browser or a pipeline and the portal's
# differ a little, and a form takes a while to fill in. A start before that is refused: a
# backdated grant would be stored as running since then.
GRANT_START_CLOCK_SKEW = timedelta(minutes=5)


def _check_dates(kind: str, starts_at: datetime | None, ends_at: datetime | None) -> None:
    if kind not in QuotaRequest.Kind.values:
        raise ValidationFailed(
            _("kind must be permanent or temporary, got %(kind)s") % {"kind": repr(kind)},
            field="kind",
        )
    _refuse_past_start(starts_at)
    if kind == QuotaRequest.Kind.TEMPORARY:
        if ends_at is None:
            raise ValidationFailed(_("a temporary request needs an end (ends_at)"), field="ends_at")
        if ends_at <= timezone.now():
            raise ValidationFailed(_("ends_at must be in the future"), field="ends_at")
        if starts_at is not None and ends_at <= starts_at:
            raise ValidationFailed(_("ends_at must come after starts_at"), field="ends_at")
        _check_grant_bounds(starts_at, ends_at)
    elif ends_at is not None:
        raise ValidationFailed(
            _("a permanent request has no end; use kind temporary"), field="ends_at"
        )


def _refuse_past_start(starts_at: datetime | None) -> None:
    """A start lies now or ahead, give or take GRANT_START_CLOCK_SKEW; empty means as soon as
    approved."""
    if starts_at is None:
        return
    earliest = timezone.now() - GRANT_START_CLOCK_SKEW
    if starts_at < earliest:
        raise ValidationFailed(
            _(
                "starts_at: a start may lie at most %(minutes)s minutes in the past (earliest "
                "%(earliest)s UTC, got %(starts_at)s); leave it empty to start as soon as approved"
            )
            % {
                "minutes": int(GRANT_START_CLOCK_SKEW.total_seconds() // 60),
                "earliest": f"{earliest:%Y-%m-%d %H:%M}",
                "starts_at": starts_at.isoformat(),
            },
            field="starts_at",
        )


def _check_grant_bounds(starts_at: datetime | None, ends_at: datetime) -> None:
    """A grant far ahead, or very long, blocks capacity for everyone: both are bounded
    (settings TEMPORARY_GRANT_MAX_START_DAYS and TEMPORARY_GRANT_MAX_DAYS)."""
    now = timezone.now()
    lead_days = settings.TEMPORARY_GRANT_MAX_START_DAYS
    if starts_at is not None and starts_at > now + timedelta(days=lead_days):
        raise ValidationFailed(
            _(
                "starts_at: a temporary grant starts at most %(days)s days ahead "
                "(latest %(latest)s UTC)"
            )
            % {"days": lead_days, "latest": f"{now + timedelta(days=lead_days):%Y-%m-%d %H:%M}"},
            field="starts_at",
        )
    max_days = settings.TEMPORARY_GRANT_MAX_DAYS
    start = max(starts_at or now, now)
    if ends_at - start > timedelta(days=max_days):
        raise ValidationFailed(
            _(
                "ends_at: a temporary grant lasts at most %(days)s days "
                "(asked for %(asked)s days from its start)"
            )
            % {"days": max_days, "asked": f"{(ends_at - start).total_seconds() / 86400:.1f}"},
            field="ends_at",
        )


def _capacity_pairs_of(lines: list[LineInput]) -> set[tuple[int, int]]:
    """(cluster id, resource id) of lines not built yet (unknown namespaces left out)."""
    namespace_ids = {line.team_namespace_id for line in lines}
    clusters = dict(
        TeamNamespace.objects.filter(pk__in=namespace_ids).values_list("pk", "cluster_id")
    )
    return {
        (clusters[line.team_namespace_id], line.resource_id)
        for line in lines
        if line.team_namespace_id in clusters
    }


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
    may_request(acting_user, team).enforce()
    if not justification.strip():
        raise ValidationFailed(_("justification must not be empty"), field="justification")
    _check_dates(kind, starts_at, ends_at)
    lines = list(lines)
    usage_now = team_usage_now(team) if submit else None  # no network call under a lock
    with transaction.atomic():
        if submit:
            lock_team_budget(team.pk)  # first: the lock order of every decision
        if suggestion is not None:
            _refuse_second_request_from(suggestion)
        if submit:
            # The capacity rows before the lines read the allocations (their base): an approval
            # landing in between made the new request "stale" and refused the whole create.
            lock_capacities(_capacity_pairs_of(lines))
        request = QuotaRequest.objects.create(
            team=team,
            requested_by=acting_user,
            justification=justification.strip(),
            kind=kind,
            starts_at=starts_at,
            ends_at=ends_at,
            suggestion=suggestion,
        )
        build_lines(request, lines)
        if submit:
            lock_for_submit(request)
        audit_record(
            acting_user=acting_user,
            action="request.draft",
            target=request,
            after={"status": S.DRAFT, "lines": lines_json(request)},
        )
        if submit:
            request = request_submit(request=request, acting_user=acting_user, usage_now=usage_now)
    return request


# A request made from a suggestion that ended in one of these leaves the suggestion open.
_SUGGESTION_REUSABLE = (S.REJECTED, S.WITHDRAWN, S.REVOKED)


def _refuse_second_request_from(suggestion: Suggestion) -> None:
    """Locks the suggestion (first in the lock order) so two clicks at once make one request."""
    lock_suggestion(suggestion.pk)
    earlier = (
        QuotaRequest.objects.filter(suggestion=suggestion)
        .exclude(status__in=_SUGGESTION_REUSABLE)
        .order_by("pk")
        .first()
    )
    if earlier is not None:
        raise NotAllowed(
            _("suggestion: already requested as #%(id)s (%(status)s)")
            % {"id": earlier.pk, "status": earlier.get_status_display()},
            field="suggestion",
            extra={"request": earlier.pk, "request_status": earlier.status},
        )


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
    require(acting_user, request, "edit", state=False)
    lines = list(lines)
    if submit and usage_now is None:
        usage_now = team_usage_now(request.team)
    with transaction.atomic():
        if submit:
            # The lock order of every decision: the team's budget, capacity rows (of the old
            # lines and the new ones) before the request row, or a revise-and-submit and an
            # approval deadlock.
            lock_team_budget(request.team_id)
            namespace_clusters = dict(
                TeamNamespace.objects.filter(
                    pk__in={line.team_namespace_id for line in lines}
                ).values_list("pk", "cluster_id")
            )
            lock_capacities(
                set(request.lines.values_list("team_namespace__cluster_id", "resource_id"))
                | {
                    (namespace_clusters[line.team_namespace_id], line.resource_id)
                    for line in lines
                    if line.team_namespace_id in namespace_clusters
                }
            )
        request = lock_request(request.pk)
        require(acting_user, request, "edit", who=False)
        before = lines_json(request)
        request.lines.all().delete()
        build_lines(request, lines)
        if submit:
            lock_for_submit(request)
        if justification is not None:
            if not justification.strip():
                raise ValidationFailed(_("justification must not be empty"), field="justification")
            request.justification = justification.strip()
            request.save(update_fields=["justification", "updated_at"])
        audit_record(
            acting_user=acting_user,
            action="request.revised",
            target=request,
            before={"lines": before},
            after={"lines": lines_json(request)},
        )
        if submit:
            request = request_submit(request=request, acting_user=acting_user, usage_now=usage_now)
    return request


# --- submitting and deciding ------------------------------------------------------------------


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
                "guarantee": format_amount(a.guarantee),
                "cap": format_amount(a.cap),
            }
            for a in allocations
        ],
    }


# What a policy decision stores on the request: submit, an approval with decided values and
# the rebase of a waiting request all store it the same way (_store_policy).
POLICY_FIELDS = ("approvals_needed", "policy_reason", "policy_reason_text")


def _store_policy(request: QuotaRequest, decision: PolicyDecision) -> None:
    """The decision's approvals needed (at least one) and its reason, in English for the
    audit log and as the text shown in each language; the caller saves POLICY_FIELDS."""
    request.approvals_needed = max(decision.approvals_needed, 1)
    request.policy_reason = decision.reason_english
    request.policy_reason_text = decision.text.to_json()


def request_submit(
    *, request: QuotaRequest, acting_user: User, usage_now: dict | None = None
) -> QuotaRequest:
    """Validate against the whole plan and submit; what policy allows is approved at once."""
    require(acting_user, request, "submit", state=False)
    # Read from the clusters before the transaction: no network call holds a row lock.
    if usage_now is None:
        usage_now = team_usage_now(request.team)
    with transaction.atomic():
        lock_request_capacity(request)
        request = lock_request(request.pk)
        require(acting_user, request, "submit", who=False)
        lock_request_allocations(request)  # auto-approval may apply at once
        _refuse_unextendable(request)
        _refuse_stale(request)
        refresh_current(request)
        lines = ordered_lines(request)
        refuse_removed_classes(lines)
        findings = validate_lines(lines, final=False, exclude_request_id=request.pk)
        raise_on_errors(findings)
        decision = policy_decision(request, lines, has_errors=False)
        request.findings = stored_findings(findings)
        request.usage_snapshot = _usage_snapshot(request, usage_now)
        _store_policy(request, decision)
        request.save(update_fields=["findings", "usage_snapshot", *POLICY_FIELDS])
        transition(
            request,
            S.SUBMITTED,
            acting_user=acting_user,
            extra={
                "warnings": [f["message"] for f in request.findings],
                "warnings_text": [f.get("text") for f in request.findings],
                "policy": decision.reason_english,
                "policy_text": decision.text.to_json(),
            },
        )
        if decision.auto_approve:
            request.auto_approved = True
            request.save(update_fields=["auto_approved"])
            _approve_final(request, lines, acting_user=None, comment=decision.reason_english)
        else:
            notify_request(request, "request.submitted")
    return request


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
    require(acting_user, request, "approve", state=False)
    with transaction.atomic():
        lock_request_capacity(request)
        request = lock_request(request.pk)
        require(acting_user, request, "approve", who=False)
        lock_request_allocations(request)
        _refuse_unextendable(request)
        _refuse_stale(request)
        refuse_removed_classes(ordered_lines(request))
        decisions = list(decisions)
        if decisions and request.is_extension:
            raise ValidationFailed(
                _("decisions: an extension changes no amounts; approve or reject it as asked"),
                field="decisions",
            )
        dropped: list[str] = []
        policy_reason = ""
        if decisions:
            if record_decisions(request, decisions):
                # Earlier approvals were given to other values: they no longer count.
                earlier = request.approvals.exclude(admin=acting_user)
                dropped = list(earlier.values_list("admin__username", flat=True))
                earlier.delete()
            # The number of approvals follows the decided values, not the requested ones.
            decision = policy_decision(
                request, ordered_lines(request), has_errors=False, auto=False
            )
            _store_policy(request, decision)
            policy_reason = decision.reason_english
        Approval.objects.create(request=request, admin=acting_user, comment=comment)
        lines = ordered_lines(request)
        findings = validate_lines(lines, final=True, exclude_request_id=request.pk)
        raise_on_errors(findings)
        request.findings = stored_findings(findings)
        request.save(update_fields=["findings", *POLICY_FIELDS])
        given = request.approvals.count()
        if given < request.approvals_needed:
            after = {"approvals": given, "needed": request.approvals_needed}
            if policy_reason:
                after["policy"] = policy_reason
                after["policy_text"] = request.policy_reason_text
            if dropped:
                after["approvals_dropped"] = dropped
            if decisions:
                after["lines"] = lines_json(request)
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
        extra={"auto_approved": request.auto_approved, "lines": lines_json(request)},
    )
    notify_request(request, "request.decided")
    if request.is_extension:
        extend_grant(request, acting_user=acting_user)
        return
    if request.is_temporary and request.starts_at and request.starts_at > timezone.now():
        return  # applied when it starts (requests_start_due)
    apply_request(request, lines, acting_user=acting_user)


def extension_refusal(extension: QuotaRequest, grant: QuotaRequest) -> NotAllowed | None:
    """Why the grant can no longer be extended to the extension's end (None: it can): it
    ended (or was never started), or its end moved past the one asked for meanwhile."""
    now = timezone.now()
    if grant.status != S.ACTIVE or grant.ends_at is None or grant.ends_at <= now:
        ended = grant.reverted_at or grant.ends_at
        return NotAllowed(
            _(
                "extends: temporary grant #%(grant)s is %(status)s (its end was %(end)s UTC); "
                "an ended grant is not extended: ask for a new temporary grant"
            )
            % {
                "grant": grant.pk,
                "status": grant.get_status_display(),
                "end": f"{ended:%Y-%m-%d %H:%M}" if ended else "-",
            },
            field="extends",
            extra={"grant": grant.pk, "grant_status": grant.status},
        )
    if extension.ends_at <= grant.ends_at:
        return NotAllowed(
            _(
                "ends_at: temporary grant #%(grant)s ends at %(end)s UTC already, not before "
                "the %(asked)s UTC this extension asks for"
            )
            % {
                "grant": grant.pk,
                "end": f"{grant.ends_at:%Y-%m-%d %H:%M}",
                "asked": f"{extension.ends_at:%Y-%m-%d %H:%M}",
            },
            field="ends_at",
            extra={"grant": grant.pk},
        )
    return None


def _refuse_unextendable(request: QuotaRequest) -> None:
    """An extension is submitted and approved only while its grant runs (and ends before
    the end asked for); call with the grant locked (lock_request_allocations)."""
    if not request.is_extension:
        return
    refusal = extension_refusal(request, QuotaRequest.objects.get(pk=request.extends_id))
    if refusal is not None:
        raise refusal


def extend_grant(extension: QuotaRequest, *, acting_user: User | None) -> None:
    """An approved extension moves the end of its grant (locked with the extension, see
    approvals.locks) and is applied: nothing changes in the allocations or the clusters, and
    the expiry (requests_expire_due) reads the new end. Refused, the approval rolls back."""
    grant = QuotaRequest.objects.get(pk=extension.extends_id)  # locked by the approval
    refusal = extension_refusal(extension, grant)
    if refusal is not None:
        raise refusal
    before = grant.ends_at
    grant.ends_at = extension.ends_at
    # The warning a day before the end is given again before the new one.
    grant.expiry_notified_at = None
    grant.save(update_fields=["ends_at", "expiry_notified_at", "updated_at"])
    audit_record(
        acting_user=acting_user,
        action="request.extended",
        target=grant,
        before={"ends_at": before.isoformat()},
        after={"ends_at": grant.ends_at.isoformat(), "extension": extension.pk},
    )
    transition(
        extension,
        S.APPLIED,
        acting_user=acting_user,
        extra={"grant": grant.pk, "ends_at_before": before.isoformat()},
    )
    notify_request(extension, "request.applied")


def apply_request(
    request: QuotaRequest, lines: list[RequestLine], *, acting_user: User | None
) -> None:
    """New allocation versions and the pending syncs, in the caller's transaction."""
    clusters = {}
    touched: dict[int, set[str]] = {}  # per cluster: the namespaces whose allocations change
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
        touched.setdefault(line.team_namespace.cluster_id, set()).add(line.team_namespace.name)
    for cluster_id, cluster in clusters.items():
        sync = cluster_sync_request(
            cluster=cluster,
            acting_user=acting_user,
            reason=f"request #{request.pk}",
            namespaces=touched[cluster_id],
        )
        request.sync_requests.add(sync)
    transition(request, S.APPLYING, acting_user=acting_user)


def request_reject(*, request: QuotaRequest, acting_user: User, comment: str) -> QuotaRequest:
    return _decide_against(
        request, acting_user, comment, "reject", _("say why the request is rejected (comment)")
    )


def request_changes(*, request: QuotaRequest, acting_user: User, comment: str) -> QuotaRequest:
    return _decide_against(
        request,
        acting_user,
        comment,
        "changes",
        _("say which changes are needed (comment)"),
    )


def _decide_against(
    request: QuotaRequest, acting_user: User, comment: str, action: str, no_comment: str
) -> QuotaRequest:
    """An admin rejects, or asks for changes: the comment says why."""
    require(acting_user, request, action, state=False)
    if not comment.strip():
        raise ValidationFailed(no_comment, field="comment")
    target = S.REJECTED if action == "reject" else S.CHANGES_REQUESTED
    with transaction.atomic():
        request = lock_request(request.pk)
        require(acting_user, request, action, who=False)
        transition(request, target, acting_user=acting_user, comment=comment)
        if target == S.CHANGES_REQUESTED:
            request.approvals.all().delete()  # given to what is to change
        notify_request(request, "request.decided")
    return request


def request_withdraw(
    *, request: QuotaRequest, acting_user: User, comment: str = ""
) -> QuotaRequest:
    require(acting_user, request, "withdraw", state=False)
    with transaction.atomic():
        request = lock_request(request.pk)
        require(acting_user, request, "withdraw", who=False)
        was = request.status
        transition(request, S.WITHDRAWN, acting_user=acting_user, comment=comment)
        if was != S.DRAFT:  # a draft was never shown to anyone
            notify_request(request, "request.withdrawn", comment=comment)
    return request


# --- lost updates: approving against a changed allocation, rebasing --------------------------


def _refuse_stale(request: QuotaRequest) -> None:
    """Refuse when an allocation the request changes moved on since the request was written
    (approving would silently undo that change); call with the allocations locked."""
    changes = request_base_changes(ordered_lines(request))
    if not changes:
        return
    first = changes[0]
    described = _("; ").join(
        f"{c['namespace']} {c['resource']} {c['field']}: {shown(c['base'])} → {shown(c['current'])}"
        for c in changes
    )
    raise NotAllowed(
        _(
            "request #%(id)s was written against older allocations (%(changes)s); "
            "rebase it on the current allocations first"
        )
        % {"id": request.pk, "changes": described},
        field=f"lines[{first['index']}].{first['field']}",
        extra={"request": request.pk, "changes": changes},
    )


def request_rebase(*, request: QuotaRequest, acting_user: User) -> QuotaRequest:
    """Move every line's base to the allocation as it is now, in one step.

    A value the request did not change (requested = base) follows the allocation; a value it
    did change is kept. Decided values and approvals given so far are dropped (the admins
    decide on the rebased request), and a submitted request is validated and policy-checked
    again as on submit, so it may now be approved automatically, or refused.
    """
    require(acting_user, request, "rebase", state=False)
    with transaction.atomic():
        lock_request_capacity(request)
        request = lock_request(request.pk)
        require(acting_user, request, "rebase", who=False)
        lock_request_allocations(request)
        lines = ordered_lines(request)
        if not request_base_changes(lines):
            return request  # nothing moved: already up to date
        before = lines_json(request)
        for index, line in enumerate(lines):
            _rebase_line(line, index)
        request.approvals.all().delete()
        lines = ordered_lines(request)
        audit_rebased(request, before, acting_user=acting_user)
        if request.status == S.SUBMITTED:
            _recheck_as_on_submit(request, lines)
    return request


def audit_rebased(
    request: QuotaRequest, lines_before: list[dict], *, acting_user: User | None, comment: str = ""
) -> None:
    """The audit event of lines moved onto the allocations as they are now."""
    audit_record(
        acting_user=acting_user,
        action="request.rebased",
        target=request,
        before={"status": request.status, "lines": lines_before},
        after={"status": request.status, "lines": lines_json(request)},
        comment=comment,
    )


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
            guarantee=merged["guarantee"],
            cap=merged["cap"],
            per_pod_max=merged["per_pod_max"],
            where=f"{line.team_namespace.name} {line.resource.name}",
        )
    except ValidationFailed as exc:
        where = f"lines[{index}]"
        raise ValidationFailed(
            _(
                "%(field)s: rebased on the current allocation of %(namespace)s %(resource)s, "
                "the request no longer holds: %(problem)s; withdraw it and ask again"
            )
            % {
                "field": f"{where}.{exc.field}",
                "namespace": line.team_namespace.name,
                "resource": line.resource.name,
                "problem": exc.message,
            },
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
    """What submit judges and stores: the findings, and the policy's decision (approvals
    needed and the reason, in both forms) as submit sets them."""
    findings = validate_lines(lines, final=False, exclude_request_id=request.pk)
    raise_on_errors(findings)
    decision = policy_decision(request, lines, has_errors=False)
    request.findings = stored_findings(findings)
    _store_policy(request, decision)
    request.save(update_fields=["findings", *POLICY_FIELDS, "updated_at"])
    if decision.auto_approve:
        request.auto_approved = True
        request.save(update_fields=["auto_approved"])
        _approve_final(request, lines, acting_user=None, comment=decision.reason_english)


# --- drafts: delete ------------------------------------------------------------------------


def request_delete(*, request: QuotaRequest, acting_user: User) -> None:
    """The requester deletes a draft they no longer want; the audit log keeps what it was."""
    require(acting_user, request, "delete", state=False)
    with transaction.atomic():
        request = lock_request(request.pk)
        require(acting_user, request, "delete", who=False)
        audit_record(
            acting_user=acting_user,
            action="request.deleted",
            target=request,
            before={
                "status": request.status,
                "justification": request.justification,
                "lines": lines_json(request),
            },
            after=None,
        )
        request.delete()


# --- after approval: following the syncs -------------------------------------------------


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
                notify_request(request, "request.applied")
                moved.append(request_id)
            elif SyncRequest.Status.FAILED in states and request.status == S.APPLYING:
                errors = request.sync_requests.filter(status=SyncRequest.Status.FAILED)
                error = next(iter(errors.values_list("last_error", flat=True)), "")
                transition(request, S.FAILED, acting_user=None, comment=error[:1000])
                notify_request(request, "request.failed")
                moved.append(request_id)
    return moved
