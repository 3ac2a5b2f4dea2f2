"""Personal API tokens: create and revoke them, and find the token a client presents.

The token (``gqp_`` + 32 random bytes, urlsafe) is returned once by ``api_token_create`` and
never stored or logged; the database keeps its sha256 and its first 8 characters.
"""

import hashlib
import hmac
import secrets
from datetime import timedelta

from django.contrib.auth.models import User
from django.utils import timezone

from portal.errors import NotAllowed, ValidationFailed
from portal.models import ApiToken

# last_used_at is written at most this often per token, not on every request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def api_token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def api_token_create(*, user: User, name: str, days: int | None = None) -> tuple[ApiToken, str]:
    """A new token of ``user``; returns the row and the token, which is never shown again."""
    name = name.strip()
    if not name:
        raise ValidationFailed("name must not be empty", field="name")
    if days is not None and days <= 0:
        raise ValidationFailed(f"days must be positive, got {days}", field="days")
    token = ApiToken.PREFIX + secrets.token_urlsafe(32)
    row = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=token[:8],
        token_hash=api_token_hash(token),
        expires_at=timezone.now() + timedelta(days=days) if days else None,
    )
    return row, token


def api_token_revoke(*, token: ApiToken) -> ApiToken:
    if token.revoked_at is not None:
        raise NotAllowed(f"token {token.prefix}… is revoked already", field="token")
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
    return token


class TokenRefused(Exception):
    """The presented token cannot be used; the message says why."""


def api_token_user(token: str) -> tuple[User, ApiToken]:
    """The user a presented token stands for, or TokenRefused with the reason."""
    if not token.startswith(ApiToken.PREFIX):
        raise TokenRefused("invalid API token")
    digest = api_token_hash(token)
    row = ApiToken.objects.select_related("user").filter(token_hash=digest).first()
    # The lookup is by hash, so timing reveals nothing of the token; compare again anyway.
    if row is None or not hmac.compare_digest(row.token_hash, digest):
        raise TokenRefused("invalid API token")
    now = timezone.now()
    if row.revoked_at is not None:
        raise TokenRefused(f"API token {row.prefix}… was revoked")
    if row.expires_at is not None and row.expires_at <= now:
        raise TokenRefused(f"API token {row.prefix}… expired at {row.expires_at.isoformat()}")
    if not row.user.is_active:
        raise TokenRefused(f"the user of API token {row.prefix}… is inactive")
    if row.last_used_at is None or now - row.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
        row.last_used_at = now
    return row.user, row
