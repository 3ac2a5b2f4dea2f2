"""The audit log's writer, verifier and export: each event carries the sha256 of the one before.

Appenders serialize on one chain-head row, so the chain never forks and seq has no gaps;
the database refuses UPDATE and DELETE on the events (migration 0003_audit_chain).
"""

import datetime
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from quotas.models.audit import AuditChainHead, AuditEvent

GENESIS_HASH = "0" * 64


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
    head = AuditChainHead.objects.select_for_update().filter(pk=AuditChainHead.SINGLETON_ID).first()
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
    return AuditChainHead.objects.select_for_update().get(pk=AuditChainHead.SINGLETON_ID)


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
        event.save(force_insert=True)
        head.last_seq, head.last_hash = event.seq, event.hash
        head.save(update_fields=["last_seq", "last_hash"])
    return event


@dataclass(frozen=True)
class AuditVerification:
    ok: bool
    checked: int
    first_broken_seq: int | None
    reason: str


def _broken(checked: int, seq: int, reason: str) -> AuditVerification:
    return AuditVerification(ok=False, checked=checked, first_broken_seq=seq, reason=reason)


def audit_verify(*, batch_size: int = 2000) -> AuditVerification:
    """Recompute the chain from event 1 and report the first broken link.

    Reads in seq-ordered batches (keyset pages on the unique seq index), so memory stays flat
    for millions of events and no long transaction is held. Events appended while it runs,
    after the head read at the start, are left for the next run.
    """
    head = AuditChainHead.objects.filter(pk=AuditChainHead.SINGLETON_ID).first()
    events = AuditEvent.objects.order_by("seq")
    if head is not None:
        events = events.filter(seq__lte=head.last_seq)
    expected_seq, prev_hash, checked = 1, GENESIS_HASH, 0
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
            prev_hash, expected_seq, checked = event.hash, expected_seq + 1, checked + 1
        if len(batch) < batch_size:
            break
    if head is not None:
        # The head records the tip: this catches events deleted from the end of the chain.
        if head.last_seq >= expected_seq:
            return _broken(checked, expected_seq, f"event {expected_seq}: missing (deleted?)")
        if head.last_seq and head.last_hash != prev_hash:
            return _broken(
                checked,
                head.last_seq,
                f"event {head.last_seq}: hash does not match the one the chain head recorded",
            )
    return AuditVerification(ok=True, checked=checked, first_broken_seq=None, reason="")


def audit_events_filtered(
    *, action: str | None = None, since: datetime.datetime | None = None
) -> QuerySet[AuditEvent]:
    """The audit log in chain order, optionally one action only and from a moment on."""
    events = AuditEvent.objects.order_by("seq")
    if action:
        events = events.filter(action=action)
    if since is not None:
        events = events.filter(created_at__gte=since)
    return events


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
        ]
