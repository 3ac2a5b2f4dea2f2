"""Notifications on quota request events: e-mail and signed webhooks, sent after the commit.

The lifecycle and the grants call :func:`notify_request` (requests.py: a request's event, its
payload and who is told), which calls :func:`notify` (dispatch.py); nothing else sends. The
Celery tasks (tasks.py) send: the e-mail in the words of mail.py, the webhooks signed by
signing.py. Webhook receivers check ``X-Portal-Signature: t=<unix time>,id=<delivery id>,v1=<hex
HMAC-SHA256 of "t.id.body">`` with :func:`verify_signature` (or its equivalent: README) and
de-duplicate on the signed delivery id: a delivery may arrive more than once (``acks_late``,
retries), always with the same id, and a captured one replayed later is refused by its
timestamp. Logs name where a webhook goes, never its path or query (redaction.py).
"""

from approvals.notify.dispatch import DECISIONS, EVENTS, notify
from approvals.notify.mail import email_body, email_subject, safe_text
from approvals.notify.requests import notify_request, request_payload
from approvals.notify.signing import (
    WebhookSignatureError,
    check_signature,
    sign,
    verify_signature,
)
from approvals.notify.tasks import send_email_task, send_webhook_task

__all__ = [
    "DECISIONS",
    "EVENTS",
    "WebhookSignatureError",
    "check_signature",
    "email_body",
    "email_subject",
    "notify",
    "notify_request",
    "request_payload",
    "safe_text",
    "send_email_task",
    "send_webhook_task",
    "sign",
    "verify_signature",
]
