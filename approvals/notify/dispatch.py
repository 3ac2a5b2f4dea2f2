"""The one way out: a notification queued after the commit, to the e-mail and webhook tasks."""

import json
import logging
import uuid

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.utils import timezone

from approvals.notify.redaction import redact_url
from approvals.notify.tasks import log_missing_secret, send_email_task, send_webhook_task
from quotas.audit.anchors import audit_anchor_write

log = logging.getLogger(__name__)

EVENTS: frozenset[str] = frozenset(
    {
        "request.submitted",
        "request.decided",
        "request.applied",
        "request.failed",
        "request.expiring",
        "request.expired",
        "request.withdrawn",
        "request.revoked",
        # Not of a request: an allocation's newest reading reached CAP_NOTICE_SHARE of its cap.
        "team.near_cap",
    }
)
# payload["status"] of a request.decided notification.
DECISIONS: frozenset[str] = frozenset({"approved", "rejected", "changes_requested"})


def notify(*, event: str, payload: dict, recipients: list[str]) -> None:
    """Send ``event`` by e-mail to ``recipients`` and to every webhook once the transaction commits.

    Raises ValueError on an unknown event, a decision that is not one of DECISIONS, or a payload
    that cannot be serialised (Decimal, datetime and UUID values become strings). Nothing is sent
    when the surrounding transaction rolls back; outside a transaction it is queued at once.
    """
    if event not in EVENTS:
        raise ValueError(f"unknown notification event {event!r}; expected one of {sorted(EVENTS)}")
    if event == "request.decided" and payload.get("status") not in DECISIONS:
        raise ValueError(
            f"request.decided needs payload status in {sorted(DECISIONS)}, "
            f"got {payload.get('status')!r}"
        )
    try:
        # Both channels see the same plain JSON data; an unserialisable payload fails here, in
        # the caller's transaction, rather than later in a worker.
        data = json.loads(json.dumps(payload, cls=DjangoJSONEncoder))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"notification payload is not JSON-serialisable: {exc}") from exc
    to = list(dict.fromkeys(r.strip() for r in recipients if r and r.strip()))
    urls = _webhook_urls()
    notification_id = str(uuid.uuid4())
    transaction.on_commit(
        lambda: _dispatch(
            event=event, data=data, recipients=to, urls=urls, notification_id=notification_id
        )
    )


def _dispatch(
    *, event: str, data: dict, recipients: list[str], urls: list[str], notification_id: str
) -> None:
    """Queue the e-mail and the webhooks; runs after the commit, so it must never raise."""
    if recipients:
        try:
            send_email_task.delay(event, data, recipients)
        except Exception:
            log.exception("could not queue the e-mail of %s %s", event, notification_id)
    if not urls:
        return
    # Each notification also anchors the audit log outside the database, and carries the
    # anchor to its receivers: copies of the head that nobody with database access can reach.
    anchor = audit_anchor_write(reason=f"webhook {notification_id}")
    body_json = json.dumps(
        {
            "event": event,
            "id": notification_id,
            "sent_at": timezone.now().isoformat(),
            "data": data,
            "audit_anchor": None if anchor is None else {"seq": anchor.seq, "mac": anchor.mac},
        },
        separators=(",", ":"),
    )
    for url in urls:
        try:
            send_webhook_task.delay(url, body_json)
        except Exception:
            log.exception(
                "could not queue webhook %s %s to %s", event, notification_id, redact_url(url)
            )


def _webhook_urls() -> list[str]:
    urls = [u for u in settings.WEBHOOK_URLS if u]
    if urls and not settings.WEBHOOK_SECRET:
        log_missing_secret()
        return []
    return urls
