"""Notifications on quota request events: e-mail and signed webhooks, sent after the commit.

The lifecycle and the grants call :func:`notify_request` (a request's event: its payload and who
is told), which calls :func:`notify`; nothing else sends. The Celery tasks here send. Webhook
receivers check ``X-Portal-Signature: t=<unix time>,id=<delivery id>,v1=<hex HMAC-SHA256 of
"t.id.body">`` with :func:`verify_signature` (or its equivalent: README) and de-duplicate on the
signed delivery id: a delivery may arrive more than once (``acks_late``, retries), always with the
same id, and a captured one replayed later is refused by its timestamp.
"""

import hashlib
import hmac
import http.client
import json
import logging
import time
import uuid
from urllib.error import HTTPError, URLError
from urllib.parse import urlsplit
from urllib.request import HTTPRedirectHandler, Request, build_opener

from celery import shared_task
from celery.utils.time import get_exponential_backoff_interval
from django.conf import settings
from django.core.mail import send_mail
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.utils import timezone, translation
from django.utils.text import capfirst
from django.utils.translation import gettext, gettext_noop
from django.utils.translation import gettext as _

from approvals.lines import lines_json
from approvals.models import QuotaRequest
from quotas.audit.anchors import audit_anchor_write
from quotas.models import TeamMembership
from quotas.roles import platform_admins
from quotas.texts import LIST_SEPARATOR

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
    }
)
# payload["status"] of a request.decided notification.
DECISIONS: frozenset[str] = frozenset({"approved", "rejected", "changes_requested"})

# E-mails are written in the portal's default language (PORTAL_DEFAULT_LANGUAGE): the
# recipients' own is not known. Webhook payloads carry codes, never text to translate.

# What the subject says happened, per event; request.decided uses the decision instead.
_SUBJECT_VERBS = {
    "request.submitted": gettext_noop("submitted"),
    "request.applied": gettext_noop("applied to the cluster"),
    "request.failed": gettext_noop("failed to apply"),
    "request.expiring": gettext_noop("expires soon"),
    "request.expired": gettext_noop("expired"),
    "request.withdrawn": gettext_noop("withdrawn by its requester"),
    "request.revoked": gettext_noop("revoked by an admin"),
}
_DECISION_VERBS = {
    "approved": gettext_noop("approved"),
    "rejected": gettext_noop("rejected"),
    "changes_requested": gettext_noop("changes requested"),
}
# Optional payload keys shown in the e-mail body, in this order, with their labels: first the
# portal's own facts, then what people (or a cluster's API) wrote, quoted.
_FACT_FIELDS = (
    ("requested_by", gettext_noop("Requested by")),
    ("decided_by", gettext_noop("Decided by")),
    ("starts_at", gettext_noop("Starts")),
    ("ends_at", gettext_noop("Ends")),
    ("expires_at", gettext_noop("Expires")),
)
_QUOTED_FIELDS = (
    ("justification", gettext_noop("Justification, as the requester wrote it")),
    ("decision_comment", gettext_noop("Comment, as written")),
    ("comment", gettext_noop("Comment, as written")),
    ("reason", gettext_noop("Reason, as written")),
    ("error", gettext_noop("Error, as reported")),
)
# Dropped from anything shown in a mail: C0/C1 control characters but line breaks and tabs,
# and the bidirectional controls that make text read in another order than it is stored.
_UNSAFE = dict.fromkeys(
    [
        *(c for c in range(0x20) if c not in (0x09, 0x0A)),
        *range(0x7F, 0xA0),
        0x061C,
        0x200E,
        0x200F,
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
    ]
)

# The values of a line in the body: "guarantee current 6, requested 8".
_LINE_FIELDS = {
    "guarantee": gettext_noop("guarantee"),
    "cap": gettext_noop("cap"),
    "per_pod_max": gettext_noop("per pod max"),
}
_LINE_STAGES = {
    "current": gettext_noop("current %(value)s"),
    "requested": gettext_noop("requested %(value)s"),
    "decided": gettext_noop("decided %(value)s"),
}

WEBHOOK_MAX_RETRIES = 5  # so at most 6 tries
EMAIL_MAX_RETRIES = 5
# Celery's exponential backoff with full jitter, for e-mail and webhooks: retry n waits a random
# whole number of seconds up to 10 * 2**n, at most 600, so what failed together does not retry
# together.
BACKOFF_BASE = 10
BACKOFF_MAX = 600

_missing_secret_logged = False


# --- public API ------------------------------------------------------------------------------


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


class WebhookSignatureError(ValueError):
    """A webhook that must not be trusted; the message says why (never the secret)."""


def sign(body: bytes, secret: str, *, delivery_id: str, timestamp: int | None = None) -> str:
    """``t=<unix>,id=<delivery id>,v1=<hex>``: HMAC-SHA256 of ``"<t>.<id>.<body>"``.

    The timestamp bounds how long a captured delivery can be replayed; the id is the receiver's
    de-duplication key, signed so that a replay cannot pass as a new delivery.
    """
    if not secret:
        raise ValueError("the webhook secret is empty")
    if not delivery_id or any(c in delivery_id for c in ",.= "):
        raise ValueError(f"delivery id {delivery_id!r} must be non-empty without , . = or spaces")
    t = int(time.time()) if timestamp is None else int(timestamp)
    return f"t={t},id={delivery_id},v1={_signature_hex(body, secret, t, delivery_id)}"


def _signature_hex(body: bytes, secret: str, t: int, delivery_id: str) -> str:
    signed = f"{t}.{delivery_id}.".encode() + body
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def check_signature(
    body: bytes,
    secret: str,
    header: str,
    *,
    delivery_id: str,
    tolerance_seconds: float | None = None,
    now: float | None = None,
) -> None:
    """Raise WebhookSignatureError unless ``header`` signs ``body`` for ``delivery_id`` recently.

    ``delivery_id`` is the ``X-Portal-Delivery`` header the receiver de-duplicates on; the
    timestamp may be at most ``tolerance_seconds`` (default ``WEBHOOK_SIGNATURE_TOLERANCE_SECONDS``)
    away from ``now``, either way (clocks drift).
    """
    if not secret:
        raise WebhookSignatureError("no webhook secret configured")
    fields: dict[str, str] = {}
    for part in (header or "").split(","):
        key, sep, value = part.strip().partition("=")
        if not sep or key in fields:
            raise WebhookSignatureError("signature header is not t=...,id=...,v1=...")
        fields[key] = value
    if set(fields) != {"t", "id", "v1"} or not fields["t"].isdigit():
        raise WebhookSignatureError("signature header is not t=...,id=...,v1=...")
    t = int(fields["t"])
    expected = _signature_hex(body, secret, t, fields["id"])
    if not hmac.compare_digest(expected.encode(), fields["v1"].encode("utf-8", "replace")):
        raise WebhookSignatureError("signature does not match the body, timestamp and id")
    if not hmac.compare_digest(
        fields["id"].encode(), (delivery_id or "").encode("utf-8", "replace")
    ):
        raise WebhookSignatureError("the signed delivery id is not the X-Portal-Delivery header")
    if tolerance_seconds is None:
        tolerance_seconds = settings.WEBHOOK_SIGNATURE_TOLERANCE_SECONDS
    age = (time.time() if now is None else now) - t
    if abs(age) > tolerance_seconds:
        raise WebhookSignatureError(
            f"signature timestamp is {abs(age):.0f}s {'old' if age > 0 else 'ahead'}, "
            f"more than the {tolerance_seconds:.0f}s tolerated (replayed?)"
        )


def verify_signature(
    body: bytes,
    secret: str,
    header: str,
    *,
    delivery_id: str,
    tolerance_seconds: float | None = None,
    now: float | None = None,
) -> bool:
    """Whether :func:`check_signature` accepts the delivery."""
    try:
        check_signature(
            body,
            secret,
            header,
            delivery_id=delivery_id,
            tolerance_seconds=tolerance_seconds,
            now=now,
        )
    except WebhookSignatureError:
        return False
    return True


# --- what a request's notification says, and to whom -----------------------------------------


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
        "lines": lines_json(request),
        "url": f"{settings.PORTAL_BASE_URL.rstrip('/')}/requests/{request.pk}/",
    }


def _recipients(request: QuotaRequest, event: str) -> list[str]:
    admins = platform_admins().values_list("email", flat=True)
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


def notify_request(request: QuotaRequest, event: str, **extra) -> None:
    """Queued for after the commit: a rolled-back decision notifies nobody."""
    notify(
        event=event,
        payload={**request_payload(request), **extra},
        recipients=_recipients(request, event),
    )


# --- tasks -----------------------------------------------------------------------------------


@shared_task(
    name="approvals.send_email",
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=EMAIL_MAX_RETRIES,
    ignore_result=True,
    # SMTP errors are OSErrors. A retry may repeat a message the server already took: mail is at
    # least once. After the last try Celery raises the error.
    autoretry_for=(OSError,),
    retry_backoff=BACKOFF_BASE,
    retry_backoff_max=BACKOFF_MAX,
    retry_jitter=True,
)
def send_email_task(event: str, payload: dict, recipients: list[str]) -> None:
    """E-mail one notification (plain text) to the recipients; retried by Celery with backoff."""
    if not recipients:
        return
    with translation.override(settings.LANGUAGE_CODE):
        subject, body = email_subject(event, payload), email_body(event, payload)
    send_mail(
        subject=subject,
        message=body,
        from_email=settings.DEFAULT_FROM_EMAIL,
        recipient_list=recipients,
    )


@shared_task(
    bind=True,
    name="approvals.send_webhook",
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=WEBHOOK_MAX_RETRIES,
)
def send_webhook_task(self, url: str, body_json: str) -> str:
    """POST one signed notification to one URL; retried with backoff on transient failures.

    Returns what happened: ``delivered``, ``gave_up`` (tries exhausted), ``rejected`` (the
    receiver answered a 3xx or a 4xx other than 429, so trying again would not help) or
    ``refused`` (no secret configured, or a URL that is not http(s)). Only Celery's Retry leaves it.
    """
    target = _redact(url)
    secret = settings.WEBHOOK_SECRET
    if not secret:
        _log_missing_secret()
        return "refused"
    if urlsplit(url).scheme not in ("http", "https"):
        log.error("webhook URL %s is not http(s): not sent", target)
        return "refused"
    body = body_json.encode()
    envelope = json.loads(body_json)
    request = Request(  # noqa: S310 - the scheme is checked above
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": "gpu-quota-portal",
            "X-Portal-Event": envelope["event"],
            "X-Portal-Delivery": envelope["id"],
            # Signed at each try: a retry carries a fresh timestamp and the same delivery id.
            "X-Portal-Signature": sign(body, secret, delivery_id=envelope["id"]),
        },
    )
    retry_after = None
    try:
        with _opener.open(request, timeout=settings.WEBHOOK_TIMEOUT) as response:
            response.read()
    except HTTPError as exc:
        exc.close()
        if exc.code != 429 and exc.code < 500:
            log.warning(
                "webhook %s delivery %s to %s rejected with HTTP %s: not retried",
                envelope["event"],
                envelope["id"],
                target,
                exc.code,
            )
            return "rejected"
        failure = f"HTTP {exc.code}"
        retry_after = _retry_after_seconds(exc.headers.get("Retry-After"))
    except (OSError, http.client.HTTPException) as exc:
        # Refused or reset connections, timeouts, TLS and protocol errors: worth another try.
        failure = str(exc.reason) if isinstance(exc, URLError) else type(exc).__name__
    else:
        log.info("webhook %s delivery %s sent to %s", envelope["event"], envelope["id"], target)
        return "delivered"

    if self.request.retries >= self.max_retries:
        log.warning(
            "webhook %s delivery %s to %s gave up after %s tries: %s",
            envelope["event"],
            envelope["id"],
            target,
            self.request.retries + 1,
            failure,
        )
        return "gave_up"
    countdown = _backoff(self.request.retries)
    if retry_after is not None:
        countdown = min(BACKOFF_MAX, max(countdown, retry_after))
    log.info(
        "webhook %s delivery %s to %s failed (%s): retry in %.1fs",
        envelope["event"],
        envelope["id"],
        target,
        failure,
        countdown,
    )
    # No exc: the retry message must not carry anything but the reason logged above.
    raise self.retry(countdown=countdown)


# --- building the messages -------------------------------------------------------------------


def _what_happened(event: str, payload: dict) -> str:
    """``request #12 approved (team-a)``, with the parts the payload has."""
    if event == "request.decided":
        status = str(payload.get("status", "decided"))
        verb = gettext(_DECISION_VERBS[status]) if status in _DECISION_VERBS else status
    else:
        verb = gettext(_SUBJECT_VERBS[event]) if event in _SUBJECT_VERBS else event
    values = {"id": payload.get("id"), "what": verb, "team": payload.get("team")}
    if values["id"] is not None and values["team"]:
        return _("request #%(id)s %(what)s (%(team)s)") % values
    if values["id"] is not None:
        return _("request #%(id)s %(what)s") % values
    if values["team"]:
        return _("request %(what)s (%(team)s)") % values
    return _("request %(what)s") % values


def email_subject(event: str, payload: dict) -> str:
    """``[GPU quota] request #12 approved (team-a)``, with the parts the payload has."""
    return _("[GPU quota] %(what)s") % {"what": _what_happened(event, payload)}


def safe_text(value: object) -> str:
    """``value`` as text without control or bidirectional characters; line breaks kept (CR LF
    and a lone CR become LF)."""
    text = str(value).replace("\r\n", "\n").replace("\r", "\n")
    return text.translate(_UNSAFE)


def email_body(event: str, payload: dict) -> str:
    """Plain text, the portal's facts first: what happened, the link, each line's current,
    requested and decided values, who and when; then what people wrote, as quoted lines
    ("> "), without control or bidirectional characters, so no text of theirs can pass for the
    portal's own (a link, a signature)."""
    parts = [_("%(what)s.") % {"what": capfirst(_what_happened(event, payload))}]
    if payload.get("url"):
        parts.append(_("Open the request: %(url)s") % {"url": payload["url"]})
    lines = payload.get("lines") or []
    if lines:
        parts.append("")
        parts.append(_("Lines:"))
        parts.extend(f"- {_describe_line(line)}" for line in lines)
    facts = [
        _("%(label)s: %(value)s") % {"label": gettext(label), "value": safe_text(payload[key])}
        for key, label in _FACT_FIELDS
        if payload.get(key) not in (None, "")
    ]
    if facts:
        parts.append("")
        parts.extend(facts)
    for key, label in _QUOTED_FIELDS:
        if payload.get(key) in (None, ""):
            continue
        parts.append("")
        parts.append(_("%(label)s:") % {"label": gettext(label)})
        parts.extend(f"> {line}".rstrip() for line in safe_text(payload[key]).split("\n"))
    parts.append("")
    parts.append("-- \n" + _("GPU quota portal (%(event)s)") % {"event": event})
    return "\n".join(parts) + "\n"


def _describe_line(line: dict) -> str:
    """``demo / team-a-training / nvidia.com/gpu: guarantee current 6, requested 8; cap ...``.

    Reads the values nested (``line["current"]["guarantee"]``) or flat (``current_guarantee``).
    """
    where = " / ".join(str(line[k]) for k in ("cluster", "namespace", "resource") if line.get(k))
    values = []
    for field, field_label in _LINE_FIELDS.items():
        known = []
        for stage, stage_label in _LINE_STAGES.items():
            nested = line.get(stage)
            value = nested.get(field) if isinstance(nested, dict) else line.get(f"{stage}_{field}")
            if value is not None:
                known.append(gettext(stage_label) % {"value": value})
        if known:
            values.append(f"{gettext(field_label)} " + gettext(", ").join(known))
    where = where or _("line")
    return f"{where}: {gettext(LIST_SEPARATOR).join(values)}" if values else where


# --- sending ---------------------------------------------------------------------------------


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
                "could not queue webhook %s %s to %s", event, notification_id, _redact(url)
            )


def _webhook_urls() -> list[str]:
    urls = [u for u in settings.WEBHOOK_URLS if u]
    if urls and not settings.WEBHOOK_SECRET:
        _log_missing_secret()
        return []
    return urls


def _log_missing_secret() -> None:
    # Unsigned webhooks could be forged by anyone who can reach the receiver: refuse to send.
    global _missing_secret_logged
    if not _missing_secret_logged:
        _missing_secret_logged = True
        log.error("WEBHOOK_URLS is set but WEBHOOK_SECRET is empty: webhooks are not sent")


def _backoff(retries: int) -> int:
    """The webhook's wait before its next try: the backoff Celery's retry_backoff and
    retry_jitter give the e-mail task, computed here (not autoretry_for) as a 429's or 503's
    Retry-After may ask for longer."""
    return get_exponential_backoff_interval(
        factor=BACKOFF_BASE, retries=retries, maximum=BACKOFF_MAX, full_jitter=True
    )


def _retry_after_seconds(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None  # an HTTP date: use our own backoff


def _redact(url: str) -> str:
    # Some receivers put a token in the URL's path or query: log only where it goes.
    parts = urlsplit(url)
    host = (parts.netloc.rpartition("@")[2]) or "?"
    return f"{parts.scheme}://{host}"


class _NoRedirects(HTTPRedirectHandler):
    # urllib would re-send a POST as a GET without the body, possibly to another host.
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_opener = build_opener(_NoRedirects)
