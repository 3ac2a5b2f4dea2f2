"""Temporary grants after their approval: started when their start comes (on top of the
allocation as it is then), warned of a day before their end, expired (the allocation restored),
or revoked by an admin before they start."""

from datetime import datetime, timedelta
from decimal import Decimal

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from approvals.lifecycle import apply_request, audit_rebased
from approvals.lines import lines_json, ordered_lines, refuse_removed_classes, shown
from approvals.locks import lock_request, lock_request_allocations, lock_request_capacity
from approvals.models import QuotaRequest, RequestLine
from approvals.notify import notify_request
from approvals.permissions import require_may
from approvals.selectors import allocation_values_now, line_base_values
from approvals.transitions import S, transition
from approvals.validation import validate_lines
from common.errors import ValidationFailed
from quotas.locks import lock_allocation
from quotas.services import allocation_set, allocation_values_check, cluster_sync_request

EXPIRY_WARNING = timedelta(days=1)


def request_revoke(*, request: QuotaRequest, acting_user: User, comment: str) -> QuotaRequest:
    """An admin takes back an approved temporary grant before it starts; its promised
    capacity is free again at once (scheduled grants count only while approved)."""
    require_may(
        acting_user, request, "revoke", _("only platform admins decide quota requests"), field=None
    )
    if not comment.strip():
        raise ValidationFailed(_("say why the grant is revoked (comment)"), field="comment")
    with transaction.atomic():
        # The same order as the start of the grant (requests_start_due).
        lock_request_capacity(request)
        request = lock_request(request.pk)
        transition(request, S.REVOKED, acting_user=acting_user, comment=comment)
        notify_request(request, "request.revoked")
    return request


# --- start ----------------------------------------------------------------------------------


def _each_locked_in(status: str, request_ids, step) -> list[int]:
    """Run `step` on each request still in `status`, one transaction each, with the locks of a
    decision taken in their fixed order (capacity rows, request, allocations and clusters)."""
    done = []
    for request_id in list(request_ids):
        with transaction.atomic():
            request = QuotaRequest.objects.get(pk=request_id)
            lock_request_capacity(request)
            request = lock_request(request_id)
            if request.status != status:
                continue  # moved on since it was picked
            lock_request_allocations(request)
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
        _(
            "%(what)s: the grant sets %(grant)s, the allocation was changed to %(now)s since "
            "the grant was approved (was %(base)s)"
        )
        % {"what": what, "grant": shown(grant), "now": shown(now), "base": shown(base)}
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
        base["per_pod_max"],
        line.final_per_pod_max,
        now["per_pod_max"],
        what=_("%(where)s per-pod max") % {"where": where},
    )
    classes = _three_way(
        base["priority_classes"],
        sorted(line.final_priority_classes),
        now["priority_classes"],
        what=_("%(where)s priority classes") % {"where": where},
    )
    try:
        g, c, p = allocation_values_check(
            guarantee=guarantee, cap=cap, per_pod_max=per_pod_max, resource=line.resource
        )
    except ValidationFailed as exc:
        raise _GrantConflict(
            _("%(where)s on top of the current allocation: %(problem)s")
            % {"where": where, "problem": exc.message}
        ) from None
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
    lines = ordered_lines(request)
    before = lines_json(request)
    problem = ""
    try:
        moved = [_grant_on_top(line) for line in lines]
        refuse_removed_classes(lines)
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
            problem = _("; ").join(f.message for f in errors)
    if problem:
        # Made by the worker, in the portal's default language, and stored as it is.
        reason = _(
            "the grant did not start: %(problem)s. The allocation is left as it is; "
            "ask again if the team still needs it"
        ) % {"problem": problem}
        # Shown with the request (page and API) as its first finding; not retried: the
        # admins approved it against a plan that no longer holds.
        request.findings = [
            {"level": "error", "rule": "grant_start", "field": "status", "message": reason},
            *request.findings,
        ]
        request.save(update_fields=["findings"])
        transition(request, S.FAILED, acting_user=None, comment=reason[:1000])
        notify_request(request, "request.failed", reason=reason)
        return
    if any(moved):
        for line in lines:
            line.save()
        audit_rebased(
            request,
            before,
            acting_user=None,
            comment="the allocation changed after the grant was approved: it applies on top "
            "of the allocation as it is at its start and restores that at its end",
        )
    apply_request(request, lines, acting_user=None)


# --- end ------------------------------------------------------------------------------------


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
            notify_request(request, "request.expiring")
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
        notify_request(request, "request.expired")

    due = QuotaRequest.objects.filter(status=S.ACTIVE, ends_at__lte=now)
    return _each_locked_in(S.ACTIVE, due.values_list("pk", flat=True), expire)


def _revert(request: QuotaRequest) -> list[str]:
    """Take the grant back. If nothing changed the allocation since, restore it exactly;
    if someone changed it meanwhile, take back only the grant's own increase."""
    notes = []
    clusters = {}
    for line in ordered_lines(request):
        allocation = lock_allocation(team_namespace=line.team_namespace, resource=line.resource)
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
