"""The Celery tasks that send: one e-mail, one webhook delivery."""

import http.client
import json
import logging
from urllib.error import HTTPError, URLError
from urllib.parse import urlsplit
from urllib.request import HTTPRedirectHandler, Request, build_opener

from celery import shared_task
from celery.utils.time import get_exponential_backoff_interval
from django.conf import settings
from django.core.mail import send_mail
from django.utils import translation

from approvals.notify.mail import email_body, email_subject
from approvals.notify.redaction import redact_url
from approvals.notify.signing import sign

log = logging.getLogger(__name__)

WEBHOOK_MAX_RETRIES = 5  # so at most 6 tries
EMAIL_MAX_RETRIES = 5
# Celery's exponential backoff with full jitter, for e-mail and webhooks: retry n waits a random
# whole number of seconds up to 10 * 2**n, at most 600, so what failed together does not retry
# together.
BACKOFF_BASE = 10
BACKOFF_MAX = 600

_missing_secret_logged = False


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
    target = redact_url(url)
    secret = settings.WEBHOOK_SECRET
    if not secret:
        log_missing_secret()
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


def log_missing_secret() -> None:
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


class _NoRedirects(HTTPRedirectHandler):
    # urllib would re-send a POST as a GET without the body, possibly to another host.
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_opener = build_opener(_NoRedirects)
