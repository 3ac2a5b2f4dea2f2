"""The audit log's writer, verifier and export: each event carries the sha256 of the one before.

Appenders serialize on one chain-head row, so the chain never forks and seq has no gaps;
the database refuses UPDATE and DELETE on the events (migration 0003_audit_chain). Each event
also carries an HMAC-SHA256 of its hash with a key kept outside the database (AUDIT_MAC_KEY), so
a log rewritten with recomputed hashes shows; anchors written outside the database
(quotas.audit.anchors) make a log that was emptied or cut short show too, and so does the
completeness check: every allocation version and request state the database holds must have
its event (AUDIT_COVERAGE), anchors or not.
"""

import datetime
import hashlib
import hmac
import json
import logging
import operator
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import reduce
from typing import Any

from django.contrib.auth.models import User
from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, transaction
from django.db.models import BigIntegerField, CharField, Field, IntegerField, Q, QuerySet
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from quotas.audit.anchors import Anchor
from quotas.locks import lock_audit_head
from quotas.models import Allocation, AllocationVersion, Team, TeamNamespace
from quotas.models.audit import AuditChainHead, AuditEvent

log = logging.getLogger(__name__)

GENESIS_HASH = "0" * 64
# Demo only: without AUDIT_MAC_KEY the key is derived from SECRET_KEY (migration 0006 has a copy).
DERIVED_KEY_LABEL = b"gpu-quota-portal audit MAC key (demo)"
_derived_key_logged = False


@dataclass(frozen=True)
class MacKey:
    key_id: str
    secret: bytes


def _mac_key_from(secret: bytes) -> MacKey:
    # The id names the key in each event without revealing it (an HMAC of a fixed label).
    key_id = hmac.new(secret, b"key id", hashlib.sha256).hexdigest()[:16]
    return MacKey(key_id=key_id, secret=secret)


def audit_mac_key_is_derived() -> bool:
    from django.conf import settings

    return not settings.AUDIT_MAC_KEY


def audit_mac_key_notice_given() -> None:
    """The caller told the person already that the key is derived (``make run``'s summary):
    this process does not log it again."""
    global _derived_key_logged
    _derived_key_logged = True


def audit_mac_key() -> MacKey:
    """The key new events are MACed with: AUDIT_MAC_KEY, else (demo) one derived from SECRET_KEY."""
    from django.conf import settings

    if settings.AUDIT_MAC_KEY:
        return _mac_key_from(settings.AUDIT_MAC_KEY.encode())
    global _derived_key_logged
    if not _derived_key_logged:
        _derived_key_logged = True
        log.warning(
            "AUDIT_MAC_KEY is not set: the audit log is MACed with a key derived from "
            "DJANGO_SECRET_KEY. Fine for the demo only; set AUDIT_MAC_KEY in production."
        )
    return _mac_key_from(
        hmac.new(settings.SECRET_KEY.encode(), DERIVED_KEY_LABEL, hashlib.sha256).digest()
    )


def audit_mac_keys() -> dict[str, MacKey]:
    """Every key events may carry, by key id: the current one and AUDIT_MAC_PREVIOUS_KEYS."""
    from django.conf import settings

    keys = [_mac_key_from(k.encode()) for k in settings.AUDIT_MAC_PREVIOUS_KEYS if k]
    keys.append(audit_mac_key())
    return {k.key_id: k for k in keys}


def audit_event_mac(secret: bytes, event_hash: str) -> str:
    """Hex HMAC-SHA256 of an event's hash; the hash covers the event and, through prev_hash,
    every event before it, so one MAC vouches for the whole chain up to it."""
    return hmac.new(secret, b"audit-event:" + event_hash.encode(), hashlib.sha256).hexdigest()


def audit_event_hash(
    *,
    seq: int,
    prev_hash: str,
    created_at: datetime.datetime,
    actor_id: int | None,
    actor_username: str,
    action: str,
    target_type: str,
    target_id: str,
    target_repr: str,
    before: Any,
    after: Any,
    comment: str,
) -> str:
    """Hex sha256 of the event's canonical JSON (the chain's format: changing it breaks it)."""
    canonical = {
        "seq": seq,
        "prev_hash": prev_hash,
        "created_at": created_at.astimezone(datetime.UTC).isoformat(timespec="microseconds"),
        "actor_id": actor_id,
        "actor_username": actor_username,
        "action": action,
        "target_type": target_type,
        "target_id": target_id,
        "target_repr": target_repr,
        "before": before,
        "after": after,
        "comment": comment,
    }
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _stored_hash(event: AuditEvent) -> str:
    return audit_event_hash(
        seq=event.seq,
        prev_hash=event.prev_hash,
        created_at=event.created_at,
        actor_id=event.actor_id,
        actor_username=event.actor_username,
        action=event.action,
        target_type=event.target_type,
        target_id=event.target_id,
        target_repr=event.target_repr,
        before=event.before,
        after=event.after,
        comment=event.comment,
    )


def _as_stored_json(value: dict | None) -> Any:
    # Hash what the JSON column will give back: Decimals and dates become strings, tuples lists.
    if value is None:
        return None
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder, allow_nan=False))


def _chain_head_locked() -> AuditChainHead:
    head = lock_audit_head()
    if head is not None:
        return head
    # No head yet (the table was emptied, e.g. by a test flush): start it at the last event.
    last = AuditEvent.objects.order_by("-seq").values("seq", "hash").first()
    try:
        with transaction.atomic():
            AuditChainHead.objects.create(
                pk=AuditChainHead.SINGLETON_ID,
                last_seq=last["seq"] if last else 0,
                last_hash=last["hash"] if last else GENESIS_HASH,
            )
    except IntegrityError:
        pass  # a concurrent appender created it first; its row is locked below
    return lock_audit_head(missing_ok=False)


def audit_record(
    *,
    acting_user: User | None,
    action: str,
    target: object,
    before: dict | None = None,
    after: dict | None = None,
    comment: str = "",
) -> AuditEvent:
    """Append one event to the chain, inside the caller's transaction.

    The chain head stays locked until the caller's transaction ends, so call this after taking
    the caller's own row locks (the head is always the last lock taken) and keep the rest short.
    """
    with transaction.atomic():
        head = _chain_head_locked()
        event = AuditEvent(
            seq=head.last_seq + 1,
            prev_hash=head.last_hash,
            created_at=datetime.datetime.now(datetime.UTC),
            actor=acting_user,
            actor_username=acting_user.get_username() if acting_user is not None else "",
            action=action,
            target_type=type(target).__name__,
            target_id=str(getattr(target, "pk", "")),
            target_repr=str(target)[:300],
            before=_as_stored_json(before),
            after=_as_stored_json(after),
            comment=comment,
        )
        event.hash = _stored_hash(event)
        key = audit_mac_key()
        event.mac, event.mac_key_id = audit_event_mac(key.secret, event.hash), key.key_id
        event.save(force_insert=True)
        head.last_seq, head.last_hash = event.seq, event.hash
        head.save(update_fields=["last_seq", "last_hash"])
    return event


def audit_changed_fields(
    before: dict | None, after: dict | None, *, keep: Iterable[str] = ()
) -> tuple[dict | None, dict | None] | None:
    """What the event of a change from state ``before`` to ``after`` records: on a change the
    fields that differ and those of ``keep`` (what names the object), on a creation (no before)
    or a deletion (no after) the whole state; None when nothing changed (no event)."""
    if before is None or after is None:
        return None if before is None and after is None else (before, after)
    old, new = _as_stored_json(before), _as_stored_json(after)
    changed = [key for key in {**old, **new} if old.get(key) != new.get(key)]
    if not changed:
        return None
    fields = [*(k for k in keep if k not in changed), *changed]
    return {k: old.get(k) for k in fields}, {k: new.get(k) for k in fields}


@dataclass(frozen=True)
class AuditVerification:
    ok: bool
    checked: int
    first_broken_seq: int | None
    reason: str
    anchors_checked: int = 0
    # Rows the log should have events of and has not (the completeness check), in words.
    missing: tuple[str, ...] = ()


def _broken(checked: int, seq: int, reason: str, anchors: int = 0) -> AuditVerification:
    return AuditVerification(
        ok=False, checked=checked, first_broken_seq=seq, reason=reason, anchors_checked=anchors
    )


def audit_verify(
    *, batch_size: int = 2000, anchors: Iterable[Anchor] = (), complete: bool = True
) -> AuditVerification:
    """Recompute the chain and its MACs from event 1, hold it against the anchors, then (with
    ``complete``) against the rows it audits (audit_missing_events).

    Reports the first broken link: a missing event, a hash or MAC that does not match, an
    anchor recording an event the log no longer has or a MAC the event no longer carries; or,
    the chain being sound, the rows whose events are gone (a log emptied or cut short together
    with its head, where no anchor was kept).
    Reads in seq-ordered batches (keyset pages on the unique seq index), so memory stays flat
    for millions of events and no long transaction is held. Events appended while it runs,
    after the head read at the start, are left for the next run.
    """
    anchors = sorted(anchors, key=lambda a: a.seq)
    anchored_seqs = {a.seq for a in anchors}
    macs_at_anchors: dict[int, str] = {}
    keys = audit_mac_keys()
    head = AuditChainHead.objects.filter(pk=AuditChainHead.SINGLETON_ID).first()
    events = AuditEvent.objects.order_by("seq")
    if head is not None:
        events = events.filter(seq__lte=max(head.last_seq, max(anchored_seqs, default=0)))
    expected_seq, prev_hash, checked, hash_at_head = 1, GENESIS_HASH, 0, GENESIS_HASH
    while True:
        batch = list(events.filter(seq__gte=expected_seq)[:batch_size])
        for event in batch:
            if event.seq != expected_seq:
                return _broken(checked, expected_seq, f"event {expected_seq}: missing (deleted?)")
            if event.prev_hash != prev_hash:
                return _broken(
                    checked,
                    event.seq,
                    f"event {event.seq}: prev_hash does not match event {event.seq - 1}",
                )
            if _stored_hash(event) != event.hash:
                return _broken(
                    checked,
                    event.seq,
                    f"event {event.seq}: hash does not match its contents (edited?)",
                )
            key = keys.get(event.mac_key_id)
            if key is None:
                return _broken(
                    checked,
                    event.seq,
                    f"event {event.seq}: MACed with key id {event.mac_key_id or '(none)'}, "
                    "which is neither AUDIT_MAC_KEY nor one of AUDIT_MAC_PREVIOUS_KEYS",
                )
            if not hmac.compare_digest(audit_event_mac(key.secret, event.hash), event.mac):
                return _broken(
                    checked,
                    event.seq,
                    f"event {event.seq}: MAC does not match (rewritten without the key?)",
                )
            if event.seq in anchored_seqs:
                macs_at_anchors[event.seq] = event.mac
            if head is not None and event.seq == head.last_seq:
                hash_at_head = event.hash
            prev_hash, expected_seq, checked = event.hash, expected_seq + 1, checked + 1
        if len(batch) < batch_size:
            break
    if head is not None:
        # The head records the tip: this catches events deleted from the end of the chain.
        if head.last_seq >= expected_seq:
            return _broken(checked, expected_seq, f"event {expected_seq}: missing (deleted?)")
        if head.last_seq and head.last_hash != hash_at_head:
            return _broken(
                checked,
                head.last_seq,
                f"event {head.last_seq}: hash does not match the one the chain head recorded",
            )
    # The anchors were written outside the database: they see a log emptied or cut short
    # together with its head, and a log rewritten from some event on.
    for number, anchor in enumerate(anchors, start=1):
        if anchor.seq > checked:
            return _broken(
                checked,
                checked + 1,
                f"event {checked + 1}: missing, but the anchor of {anchor.at} ({anchor.source}) "
                f"recorded events up to {anchor.seq}; the log ends at event {checked} "
                "(deleted or truncated?)",
                number - 1,
            )
        if anchor.seq and not hmac.compare_digest(macs_at_anchors[anchor.seq], anchor.mac):
            return _broken(
                checked,
                anchor.seq,
                f"event {anchor.seq}: MAC differs from the anchor of {anchor.at} "
                f"({anchor.source}) (rewritten?)",
                number - 1,
            )
    # The chain is sound: where the log was emptied or cut short together with its head and
    # no anchor was kept, the rows it audits still show what it lacks.
    missing = tuple(audit_missing_events()) if complete else ()
    reason = "; ".join(missing) + " (events deleted, or the log emptied or cut short?)"
    return AuditVerification(
        ok=not missing,
        checked=checked,
        first_broken_seq=None,
        reason=reason if missing else "",
        anchors_checked=len(anchors),
        missing=missing,
    )


# --- completeness: the rows whose every state the log must hold -------------------------------


@dataclass(frozen=True)
class AuditCoverage:
    """Rows of which each must have its event, compared as sets (one EXCEPT query).

    ``rows()`` is a values_list of field names giving (target id, value) pairs, or target ids
    alone when ``after_key`` is None; an event of one of ``actions`` about ``target_type``
    records the pair as (its target_id, its ``after[after_key]``). ``describe`` names some
    missing pairs in words; ``event`` says which event each row should have.
    """

    what: str  # plural: "allocation versions"
    event: str  # "allocation.changed event"
    target_type: str
    actions: tuple[str, ...]
    rows: Callable[[], QuerySet]
    describe: Callable[[list[tuple]], list[str]]
    after_key: str | None = None
    value_field: Field | None = None  # the type of after[after_key] as the rows hold it


# By ``what``: quotas registers its allocation versions below, other apps theirs in ready()
# (approvals: its requests), so the log needs no knowledge of the apps that write to it.
AUDIT_COVERAGE: dict[str, AuditCoverage] = {}
MISSING_SHOWN = 5


def audit_coverage(coverage: AuditCoverage) -> None:
    AUDIT_COVERAGE[coverage.what] = coverage


def _recorded(coverage: AuditCoverage) -> QuerySet:
    # Only ids of digits are cast: PostgreSQL would fail the whole check on any other text.
    events = AuditEvent.objects.order_by().filter(
        target_type=coverage.target_type, action__in=coverage.actions, target_id__regex=r"^[0-9]+$"
    )
    target = Cast("target_id", BigIntegerField())
    if coverage.after_key is None:
        return events.values_list(target)
    value = Cast(KT(f"after__{coverage.after_key}"), coverage.value_field)
    return events.values_list(target, value)


def audit_missing_events() -> list[str]:
    """Per kind of row, those the log has no event of: one set difference each (rows EXCEPT
    what the events record), so the cost grows with rows and events, never their product."""
    problems = []
    for coverage in AUDIT_COVERAGE.values():
        rows = coverage.rows().order_by()
        missing = rows.difference(_recorded(coverage))
        count = missing.count()
        if not count:
            continue
        shown = list(missing.order_by(*rows.query.values_select)[:MISSING_SHOWN])
        names = ", ".join(coverage.describe(shown)) + (", …" if count > len(shown) else "")
        problems.append(f"{coverage.what} without their {coverage.event}: {count} ({names})")
    return problems


def _describe_allocation_versions(pairs: list[tuple]) -> list[str]:
    names = {
        a.pk: f"{a.team_namespace.cluster.name}/{a.team_namespace.name} {a.resource.name}"
        for a in Allocation.objects.select_related("team_namespace__cluster", "resource").filter(
            pk__in={allocation_id for allocation_id, _ in pairs}
        )
    }
    return [f"{names.get(pk, f'allocation {pk}')} version {version}" for pk, version in pairs]


audit_coverage(
    AuditCoverage(
        what="allocation versions",
        event="allocation.changed event",
        target_type="Allocation",
        actions=("allocation.changed",),
        rows=lambda: AllocationVersion.objects.values_list("allocation_id", "version"),
        after_key="version",
        value_field=IntegerField(),
        describe=_describe_allocation_versions,
    )
)


def audit_events_filtered(
    *, action: str | None = None, since: datetime.datetime | None = None
) -> QuerySet[AuditEvent]:
    """The audit log in chain order, optionally one action only and from a moment on (the
    page and the export narrow it further with quotas.filtersets.AuditEventFilterSet)."""
    events = AuditEvent.objects.order_by("seq")
    if action:
        events = events.filter(action=action)
    if since is not None:
        events = events.filter(created_at__gte=since)
    return events


# Per target type, the ids (as the log keeps them: text) of a team's objects of that type,
# as a queryset of one column. Apps register theirs (approvals: its requests) in ready(),
# so the log needs no knowledge of the apps that write to it.
TeamTargets = Callable[[int], QuerySet]
AUDIT_TEAM_TARGETS: dict[str, TeamTargets] = {}


def audit_team_targets(target_type: str, targets: TeamTargets) -> None:
    AUDIT_TEAM_TARGETS[target_type] = targets


def _ids_as_text(queryset: QuerySet) -> QuerySet:
    return queryset.annotate(target_key=Cast("pk", CharField())).values("target_key")


def audit_events_of_team(events: QuerySet[AuditEvent], team_id: int) -> QuerySet[AuditEvent]:
    """The events about the team itself or one of its objects (namespaces, allocations,
    memberships, and whatever other apps registered, such as requests); one query, with
    subqueries."""
    kinds: dict[str, TeamTargets] = {
        "Team": lambda t: Team.objects.filter(pk=t),
        "TeamNamespace": lambda t: TeamNamespace.objects.filter(team_id=t),
        "Allocation": lambda t: Allocation.objects.filter(team_namespace__team_id=t),
        **AUDIT_TEAM_TARGETS,
    }
    about_team = [
        Q(target_type=target_type, target_id__in=_ids_as_text(targets(team_id)))
        for target_type, targets in kinds.items()
    ]
    # Memberships name their team in every event (quotas.teams): found after they are gone.
    about_team.append(
        Q(target_type="TeamMembership") & (Q(before__team_id=team_id) | Q(after__team_id=team_id))
    )
    return events.filter(reduce(operator.or_, about_team))


CSV_HEADER = [
    "seq",
    "created_at",
    "actor_id",
    "actor_username",
    "action",
    "target_type",
    "target_id",
    "target_repr",
    "before",
    "after",
    "comment",
    "prev_hash",
    "hash",
    "mac_key_id",
    "mac",
]


def _cell(value: str) -> str:
    # A spreadsheet runs a cell starting with one of these as a formula (CSV injection).
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def _json_cell(value: Any) -> str:
    return "" if value is None else json.dumps(value, sort_keys=True, ensure_ascii=False)


def audit_csv_rows(queryset: Iterable[AuditEvent]) -> Iterator[list[str]]:
    """The header, then one row per event; streams a queryset in chunks."""
    yield CSV_HEADER
    events = queryset.iterator(chunk_size=2000) if isinstance(queryset, QuerySet) else queryset
    for event in events:
        yield [
            str(event.seq),
            event.created_at.astimezone(datetime.UTC).isoformat(timespec="microseconds"),
            "" if event.actor_id is None else str(event.actor_id),
            _cell(event.actor_username),
            _cell(event.action),
            _cell(event.target_type),
            _cell(event.target_id),
            _cell(event.target_repr),
            _json_cell(event.before),
            _json_cell(event.after),
            _cell(event.comment),
            event.prev_hash,
            event.hash,
            event.mac_key_id,
            event.mac,
        ]
