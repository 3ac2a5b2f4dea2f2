"""Personal API tokens: create, list and revoke them, and find the token a client presents.

A token is ``gqp_<public id>_<secret>``: the public id (10 random base32 characters) names it in
lists, logs and messages; the secret is 32 random bytes. The token is returned once by
``api_token_create`` and never stored or logged: the database keeps the public id and the sha256
of the whole token. Every token expires (API_TOKEN_DEFAULT_DAYS unless asked otherwise, at most
API_TOKEN_MAX_DAYS). Creating and revoking are audited.
"""

import hashlib
import hmac
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.translation import gettext as _

from common.errors import NotAllowed, PermissionDenied, ValidationFailed
from portal.models import ApiToken
from quotas.audit.chain import audit_record
from quotas.roles import is_platform_admin

# last_used_at is written at most this often per token, not on every request.
LAST_USED_RESOLUTION = timedelta(minutes=1)
PUBLIC_ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"
PUBLIC_ID_LENGTH = 10
NAME_MAX_LENGTH = ApiToken._meta.get_field("name").max_length


def api_token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _new_public_id() -> str:
    return "".join(secrets.choice(PUBLIC_ID_ALPHABET) for _ in range(PUBLIC_ID_LENGTH))


def api_token_create(
    *,
    user: User,
    name: str,
    days: int | None = None,
    acting_user: User | None = None,
    comment: str = "",
) -> tuple[ApiToken, str]:
    """A new token of ``user`` (made by ``acting_user``, by default the user themselves);
    returns the row and the token, which is never shown again."""
    acting_user = acting_user or user
    if acting_user != user and not is_platform_admin(acting_user):
        raise PermissionDenied(_("only platform admins create tokens for other users"))
    name = name.strip()
    if not name:
        raise ValidationFailed(_("name must not be empty"), field="name")
    if len(name) > NAME_MAX_LENGTH:
        raise ValidationFailed(
            _("name must be at most %(max)s characters, got %(length)s")
            % {"max": NAME_MAX_LENGTH, "length": len(name)},
            field="name",
        )
    if days is None:
        days = settings.API_TOKEN_DEFAULT_DAYS
    if days <= 0:
        raise ValidationFailed(
            _("days must be positive, got %(days)s") % {"days": days}, field="days"
        )
    if days > settings.API_TOKEN_MAX_DAYS:
        raise ValidationFailed(
            _("days must be at most %(max)s (API_TOKEN_MAX_DAYS), got %(days)s")
            % {"max": settings.API_TOKEN_MAX_DAYS, "days": days},
            field="days",
        )
    public_id = _new_public_id()
    token = f"{ApiToken.PREFIX}{public_id}_{secrets.token_urlsafe(32)}"
    with transaction.atomic():
        row = ApiToken.objects.create(
            user=user,
            name=name,
            public_id=public_id,
            token_hash=api_token_hash(token),
            expires_at=timezone.now() + timedelta(days=days),
        )
        audit_record(
            acting_user=acting_user,
            action="api_token.create",
            target=row,
            after={"user": user.get_username(), "name": name, "expires_at": row.expires_at},
            comment=comment,
        )
    return row, token


def api_tokens_visible_to(user: User) -> QuerySet[ApiToken]:
    """The user's own tokens; platform admins see everyone's."""
    tokens = ApiToken.objects.select_related("user")
    return tokens if is_platform_admin(user) else tokens.filter(user=user)


def api_token_revoke(*, token: ApiToken, acting_user: User, comment: str = "") -> ApiToken:
    """Revoke a token: its owner may, and platform admins may revoke anyone's."""
    if token.user_id != acting_user.pk and not is_platform_admin(acting_user):
        raise PermissionDenied(_("only the token's owner or a platform admin may revoke it"))
    with transaction.atomic():
        token = ApiToken.objects.select_for_update().select_related("user").get(pk=token.pk)
        if token.revoked_at is not None:
            raise NotAllowed(
                _("token %(label)s is revoked already") % {"label": token.label}, field="token"
            )
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        audit_record(
            acting_user=acting_user,
            action="api_token.revoke",
            target=token,
            before={"revoked_at": None},
            after={"revoked_at": token.revoked_at},
            comment=comment,
        )
    return token


class TokenRefused(Exception):
    """The presented token cannot be used; the message says why."""


def api_token_user(token: str) -> tuple[User, ApiToken]:
    """The user a presented token stands for, or TokenRefused with the reason."""
    if not token.startswith(ApiToken.PREFIX):
        raise TokenRefused(_("invalid API token"))
    digest = api_token_hash(token)
    # The user's groups with the user, one query: the role checks then read none each.
    row = (
        ApiToken.objects.select_related("user")
        .prefetch_related("user__groups")
        .filter(token_hash=digest)
        .first()
    )
    # The lookup is by hash, so timing reveals nothing of the token; compare again anyway.
    if row is None or not hmac.compare_digest(row.token_hash, digest):
        raise TokenRefused(_("invalid API token"))
    now = timezone.now()
    if row.revoked_at is not None:
        raise TokenRefused(_("API token %(label)s was revoked") % {"label": row.label})
    if row.expires_at <= now:
        raise TokenRefused(
            _("API token %(label)s expired at %(at)s")
            % {"label": row.label, "at": row.expires_at.isoformat()}
        )
    if not row.user.is_active:
        raise TokenRefused(_("the user of API token %(label)s is inactive") % {"label": row.label})
    if row.last_used_at is None or now - row.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
        row.last_used_at = now
    return row.user, row


def api_token_target_words(ids: list[int]) -> dict[int, dict[str, str]]:
    """How the audit log names tokens: "ci (gqp_abc…) of lead-a" (quotas.audit.targets)."""
    rows = (
        ApiToken.objects.filter(pk__in=ids)
        .select_related("user")
        .only("pk", "name", "public_id", "user__username")
    )
    return {
        token.pk: {
            "text": _("%(name)s (%(label)s) of %(user)s")
            % {"name": token.name, "label": token.label, "user": token.user.username}
        }
        for token in rows
    }
