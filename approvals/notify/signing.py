"""Signing a webhook delivery, and the receiver's check of it."""

import hashlib
import hmac
import time

from django.conf import settings


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
