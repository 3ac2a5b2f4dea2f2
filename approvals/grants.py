"""Temporary grants after their approval: started when their start comes (on top of the
allocation as it is then), warned of a day before their end, extended by an approved
extension request (grant_extension_request), expired (what they widened taken back, see
grant_end_values), or revoked by an admin before they start."""

from collections.abc import Iterable
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from approvals.access import require
from approvals.lifecycle import apply_request, audit_rebased, request_submit
from approvals.lines import (
    LineInput,
    build_lines,
    lines_json,
    ordered_lines,
    refuse_removed_classes,
    shown,
)
from approvals.locks import (
    lock_for_submit,
    lock_request,
    lock_request_allocations,
    lock_request_capacity,
)
from approvals.models import QuotaRequest, RequestLine
from approvals.notify import notify_request
from approvals.selectors import allocation_values, allocation_values_now, line_base_values
from approvals.transitions import S, transition
from approvals.validation import validate_lines
from common.amounts import format_amount
from common.errors import NotAllowed, ValidationFailed
from quotas.audit.chain import audit_record
from quotas.kube.live_usage import team_usage_now
from quotas.locks import lock_allocation
from quotas.models import PriorityClass
from quotas.services import allocation_set, allocation_values_check, cluster_sync_request

EXPIRY_WARNING = timedelta(days=1)


def request_revoke(*, request: QuotaRequest, acting_user: User, comment: str) -> QuotaRequest:
    """An admin takes back an approved temporary grant before it starts; its promised
    capacity is free again at once (scheduled grants count only while approved)."""
    require(acting_user, request, "revoke", state=False)
    if not comment.strip():
        raise ValidationFailed(_("say why the grant is revoked (comment)"), field="comment")
    with transaction.atomic():
        # The same order as the start of the grant (requests_start_due).
        lock_request_capacity(request)
        request = lock_request(request.pk)
        require(acting_user, request, "revoke", who=False)
        transition(request, S.REVOKED, acting_user=acting_user, comment=comment)
        notify_request(request, "request.revoked")
    return request


# --- extension ------------------------------------------------------------------------------

# The statuses of an extension still in the making or waiting: one at a time per grant.
_OPEN = (S.DRAFT, S.SUBMITTED, S.CHANGES_REQUESTED)


def _check_extension_end(ends_at: datetime | None) -> None:
    if ends_at is None:
        raise ValidationFailed(_("ends_at: say when the grant should end now"), field="ends_at")
    now = timezone.now()
    if ends_at <= now:
        raise ValidationFailed(_("ends_at must be in the future"), field="ends_at")
    # As long as a new grant may last, counted from now: chained extensions stay bounded.
    max_days = settings.TEMPORARY_GRANT_MAX_DAYS
    if ends_at - now > timedelta(days=max_days):
        raise ValidationFailed(
            _("ends_at: an extension reaches at most %(days)s days ahead (latest %(latest)s UTC)")
            % {"days": max_days, "latest": f"{now + timedelta(days=max_days):%Y-%m-%d %H:%M}"},
            field="ends_at",
        )


def grant_extension_request(
    *, grant: QuotaRequest, acting_user: User, ends_at: datetime | None, justification: str
) -> QuotaRequest:
    """A lead asks for a later end of a running temporary grant: a request of kind extension,
    submitted at once, whose lines are the grant's namespaces and resources as allocated now
    (it changes no allocation). Admins decide it like any request (approvals.policy: the
    admins the grant's change needs); approved, it moves the grant's end
    (lifecycle.extend_grant). Refused: a grant that is not running, an end not after the
    current one, a second open extension of the same grant."""
    require(acting_user, grant, "extend", state=False)
    if not justification.strip():
        raise ValidationFailed(_("justification must not be empty"), field="justification")
    _check_extension_end(ends_at)
    usage_now = team_usage_now(grant.team)  # no network call under a lock
    with transaction.atomic():
        lock_request_capacity(grant)
        grant = lock_request(grant.pk)
        require(acting_user, grant, "extend", who=False)
        if ends_at <= grant.ends_at:
            raise ValidationFailed(
                _("ends_at: the grant ends at %(end)s UTC already; ask for a later end")
                % {"end": f"{grant.ends_at:%Y-%m-%d %H:%M}"},
                field="ends_at",
            )
        waiting = grant.extensions.filter(status__in=_OPEN).order_by("pk").first()
        if waiting is not None:
            raise NotAllowed(
                _("extends: grant #%(grant)s has an open extension already: #%(id)s (%(status)s)")
                % {"grant": grant.pk, "id": waiting.pk, "status": waiting.get_status_display()},
                field="extends",
                extra={"request": waiting.pk, "request_status": waiting.status},
            )
        extension = QuotaRequest.objects.create(
            team=grant.team,
            requested_by=acting_user,
            justification=justification.strip(),
            kind=QuotaRequest.Kind.EXTENSION,
            extends=grant,
            ends_at=ends_at,
        )
        lines = []
        for line in ordered_lines(grant):
            _allocation, now = allocation_values_now(line)
            lines.append(
                LineInput(line.team_namespace_id, line.resource_id, now["guarantee"], now["cap"])
            )
        build_lines(extension, lines)
        lock_for_submit(extension)
        audit_record(
            acting_user=acting_user,
            action="request.draft",
            target=extension,
            after={
                "status": S.DRAFT,
                "extends": grant.pk,
                "ends_at_now": grant.ends_at.isoformat(),
                "ends_at": ends_at.isoformat(),
                "lines": lines_json(extension),
            },
        )
        return request_submit(request=extension, acting_user=acting_user, usage_now=usage_now)


# --- start ----------------------------------------------------------------------------------


def _each_locked_in(status: str, request_ids, step, *, still_due=None) -> list[int]:
    """Run `step` on each request still in `status` (and ``still_due``, asked with it locked),
    one transaction each, with the locks of a decision taken in their fixed order (capacity
    rows, request, allocations and clusters)."""
    done = []
    for request_id in list(request_ids):
        with transaction.atomic():
            request = QuotaRequest.objects.get(pk=request_id)
            lock_request_capacity(request)
            request = lock_request(request_id)
            if request.status != status:
                continue  # moved on since it was picked
            if still_due is not None and not still_due(request):
                continue  # its end moved (an extension approved) since it was picked
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
            guarantee=guarantee,
            cap=cap,
            per_pod_max=per_pod_max,
            where=f"{line.team_namespace.name} {line.resource.name}",
            resource=line.resource,
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
    """End temporary grants: take back what they widened (grant_end_values), sync, mark
    expired; the expired event says, per line, what was taken back."""
    now = now or timezone.now()

    def expire(request: QuotaRequest) -> None:
        ended = _revert(request)
        transition(
            request,
            S.EXPIRED,
            acting_user=None,
            comment="; ".join(line["note"] for line in ended),
            extra={"taken_back": [{k: v for k, v in e.items() if k != "note"} for e in ended]},
        )
        request.reverted_at = now
        request.save(update_fields=["reverted_at"])
        notify_request(request, "request.expired")

    due = QuotaRequest.objects.filter(status=S.ACTIVE, ends_at__lte=now)
    return _each_locked_in(
        S.ACTIVE,
        due.values_list("pk", flat=True),
        expire,
        still_due=lambda request: request.ends_at <= now,
    )


FIELDS = ("guarantee", "cap", "per_pod_max", "priority_classes")
_LABELS = {
    "guarantee": "guarantee",
    "cap": "cap",
    "per_pod_max": "per-pod max",
    "priority_classes": "priority classes",
}


def grant_end_values(
    *, before: dict, granted: dict, now: dict, known_classes: Iterable[str] = ()
) -> dict:
    """The allocation once a temporary grant ends, field by field (pure).

    ``before`` is the allocation at the grant's start, ``granted`` what the grant set, ``now``
    the allocation at its end; each a dict of FIELDS (no per-pod max: up to the cap; no
    classes: every class; a cap of 0: nothing at all). What the grant widened never outlasts
    it, whatever changed meanwhile in other fields. A field someone changed permanently during
    the grant was judged against the granted value, so the end takes back only the grant's
    share of it:

    - guarantee and cap add up: the value now less the grant's change (its increase goes, a
      decrease it made comes back), never below 0; the cap never below the guarantee. With a
      grant of cap 4 → 6 and a permanent +1 during it (7), the cap ends at 5.
    - per-pod max, if the grant raised or removed it: the value now less the grant's increase,
      but never below the narrower of the value before and now (a permanent lowering during
      the grant stays as far as it is narrower than before). 1 → 4 by the grant, 6 by a
      permanent change during it: 3; lowered to 2 during it: 1. A max a permanent change
      removed during the grant stays removed (admins approved no max).
    - priority classes, if the grant added some (every class but the ones before, if it
      lifted the restriction): they go from the classes now; a class a permanent change added
      during the grant stays. When no class would be left, the classes before come back; if
      nothing was allowed before (no allocation, or a cap of 0), nothing is: guarantee and
      cap 0.
    - a field the grant did not widen: back to its value before if nobody changed it since
      the grant set it, else as it is now.
    """
    guarantee = max(Decimal(0), now["guarantee"] - (granted["guarantee"] - before["guarantee"]))
    cap = max(guarantee, now["cap"] - (granted["cap"] - before["cap"]))
    per_pod_max = _per_pod_max_end(
        before["per_pod_max"], granted["per_pod_max"], now["per_pod_max"]
    )
    universe = frozenset(known_classes)
    for values in (before, granted, now):
        universe |= frozenset(values["priority_classes"])
    allowed = _classes_end(before, granted, now, universe=universe)
    if allowed is _NOTHING:
        # A cap of 0 allows nothing, whatever classes it lists (those stay as they are).
        guarantee = cap = Decimal(0)
        per_pod_max = None
        classes = sorted(now["priority_classes"])
    else:
        classes = [] if allowed is None else sorted(allowed)
    if per_pod_max is not None and per_pod_max > cap:
        per_pod_max = cap if cap > 0 else None
    return {
        "guarantee": guarantee,
        "cap": cap,
        "per_pod_max": per_pod_max,
        "priority_classes": classes,
    }


def _per_pod_max_end(before, granted, now):
    """See grant_end_values; None is no max (the widest)."""
    widened = before is not None and (granted is None or granted > before)
    if not widened:
        return before if now == granted else now
    if now is None:
        return before if granted is None else None
    if granted is None:
        return min(now, before)
    return max(now - (granted - before), min(now, before))


# No class may be allowed at the end: nothing was before the grant, and none of the classes
# allowed now is anyone's but the grant's.
_NOTHING = "nothing allowed"


def _listed(values: dict) -> frozenset[str] | None:
    """What a list of classes allows: None every class (no restriction), else those."""
    return frozenset(values["priority_classes"]) or None


def _classes_end(before: dict, granted: dict, now: dict, *, universe: frozenset[str]):
    """The classes at the end (see grant_end_values): None every class, a set those, or
    _NOTHING when nothing may be allowed."""

    def every(values: dict) -> frozenset[str]:
        return _listed(values) or universe

    if granted["cap"] <= 0:
        added = frozenset()  # the grant allowed nothing
    elif before["cap"] <= 0:
        added = every(granted)  # nothing was allowed before
    else:
        added = every(granted) - every(before)
    if not added:
        unchanged = now["priority_classes"] == granted["priority_classes"]
        return _listed(before) if unchanged else _listed(now)
    if _listed(now) is None and _listed(granted) is None:
        left = frozenset() if before["cap"] <= 0 else every(before)  # nobody set one since
    else:
        left = every(now) - added
    if left:
        return left
    return _listed(before) if before["cap"] > 0 else _NOTHING


def _shown(field: str, value) -> str:
    if field == "priority_classes":
        return ", ".join(value) or "any"
    return "none" if value is None else format_amount(value)


def _revert(request: QuotaRequest) -> list[dict]:
    """Take the grant back (grant_end_values) and ask for the syncs; per line, what was taken
    back, for the expired event."""
    ended = []
    clusters = {}
    touched: dict[int, set[str]] = {}  # per cluster: the namespaces whose allocations change
    known = list(PriorityClass.objects.values_list("name", flat=True))
    for line in ordered_lines(request):
        allocation = lock_allocation(team_namespace=line.team_namespace, resource=line.resource)
        if allocation is None:
            continue
        before = line_base_values(line)
        now = allocation_values(allocation)
        granted = {
            "guarantee": line.final_guarantee,
            "cap": line.final_cap,
            "per_pod_max": line.final_per_pod_max,
            "priority_classes": sorted(line.final_priority_classes),
        }
        if allocation.version == line.applied_version:
            after, changed = before, []  # nothing changed it since: exactly as before
        else:
            after = grant_end_values(before=before, granted=granted, now=now, known_classes=known)
            changed = [f for f in FIELDS if now[f] != granted[f]]
        allocation_set(
            team_namespace=line.team_namespace,
            resource=line.resource,
            guarantee=after["guarantee"],
            cap=after["cap"],
            per_pod_max=after["per_pod_max"],
            priority_classes=after["priority_classes"],
            acting_user=None,
            reason=f"temporary request #{request.pk} ended",
            source=f"request:{request.pk}:expired",
        )
        taken = {
            f: {"from": _shown(f, now[f]), "to": _shown(f, after[f])}
            for f in FIELDS
            if now[f] != after[f]
        }
        where = f"{line.team_namespace.name} {line.resource.name}"
        note = f"{where}: took back " + (
            ", ".join(f"{_LABELS[f]} {v['from']} → {v['to']}" for f, v in taken.items())
            or "nothing"
        )
        if changed:
            kept = ", ".join(_LABELS[f] for f in changed)
            note += f" (changed during the grant: {kept}; those keep their own change)"
        ended.append(
            {
                "namespace": line.team_namespace.name,
                "cluster": line.team_namespace.cluster.name,
                "resource": line.resource.name,
                "changed_during_grant": changed,
                "fields": taken,
                "note": note,
            }
        )
        clusters[line.team_namespace.cluster_id] = line.team_namespace.cluster
        touched.setdefault(line.team_namespace.cluster_id, set()).add(line.team_namespace.name)
    for cluster_id, cluster in clusters.items():
        sync = cluster_sync_request(
            cluster=cluster,
            acting_user=None,
            reason=f"request #{request.pk} expired",
            namespaces=touched[cluster_id],
        )
        request.sync_requests.add(sync)
    return ended
