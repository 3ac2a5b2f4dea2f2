"""Reading the provider's claims, which arrive from outside: the ID token's own checks that
mozilla-django-oidc leaves out (issuer, audience), the groups claim in whatever shape it comes,
and the profile fields and user name a new account gets. Pure: claims in, values or the
problem out."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import EmailValidator

# Bounds on what a provider sends: a longer value is cut (names) or dropped (groups).
MAX_GROUPS = 1000
MAX_GROUP_LENGTH = 255
MAX_SUBJECT_LENGTH = 255
NAME_LENGTH = 150  # Django's first_name, last_name and username
EMAIL_LENGTH = 254
_NOT_IN_USERNAME = re.compile(r"[^\w.@+-]", re.ASCII)


def id_token_problem(claims: Mapping[str, Any], *, issuer: str, client_id: str) -> str | None:
    """Why the (signature-checked) ID token is not one the provider gave this portal, else
    None: OpenID Connect Core 3.1.3.7 (issuer, audience, authorized party, subject)."""
    if claims.get("iss") != issuer:
        return "the ID token's issuer is not the configured one"
    audience = claims.get("aud")
    audiences = [audience] if isinstance(audience, str) else audience
    if not isinstance(audiences, list) or client_id not in audiences:
        return "the ID token is not for this client (aud)"
    if (len(audiences) > 1 or "azp" in claims) and claims.get("azp") != client_id:
        return "the ID token's authorized party (azp) is another client"
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject or len(subject) > MAX_SUBJECT_LENGTH:
        return "the ID token has no usable subject (sub)"
    if not isinstance(claims.get("exp"), int | float):
        return "the ID token has no expiry (exp)"
    return None


def groups_from_claim(value: Any) -> tuple[list[str], list[str]]:
    """(groups, problems) from the groups claim: a list of names (one name alone is taken as a
    list of one); anything else in it is left out and named in the problems."""
    if value is None:
        return [], []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple):
        return [], [f"the groups claim is a {type(value).__name__}, not a list: no groups read"]
    groups, problems = [], []
    for item in value:
        if not isinstance(item, str) or not item.strip():
            problems.append(f"a group that is not a name ({type(item).__name__}) left out")
        elif len(item) > MAX_GROUP_LENGTH:
            problems.append(f"a group name of {len(item)} characters left out")
        else:
            groups.append(item.strip())
    if len(groups) > MAX_GROUPS:
        problems.append(f"{len(groups)} groups: only the first {MAX_GROUPS} read")
        groups = groups[:MAX_GROUPS]
    return groups, problems


@dataclass(frozen=True)
class Profile:
    """What the claims say of a person ("" where they say nothing usable)."""

    email: str
    email_verified: bool
    first_name: str
    last_name: str


def _text(value: Any, limit: int) -> str:
    return value.strip()[:limit] if isinstance(value, str) else ""


def profile_from_claims(claims: Mapping[str, Any]) -> Profile:
    email = _text(claims.get("email"), EMAIL_LENGTH + 1)
    try:
        EmailValidator()(email)
    except ValidationError:
        email = ""
    if len(email) > EMAIL_LENGTH:
        email = ""
    first, last = (
        _text(claims.get("given_name"), NAME_LENGTH),
        _text(claims.get("family_name"), NAME_LENGTH),
    )
    if not (first or last):
        first, _, last = _text(claims.get("name"), 2 * NAME_LENGTH + 1).partition(" ")
        first, last = first[:NAME_LENGTH], last.strip()[:NAME_LENGTH]
    return Profile(
        email=email,
        email_verified=claims.get("email_verified") is True,
        first_name=first,
        last_name=last,
    )


def username_candidates(claims: Mapping[str, Any]) -> list[str]:
    """User names a new account may take, best first: the provider's preferred user name, the
    e-mail address's local part, then "sso-user" (the caller adds a number to a taken one)."""
    found = []
    email = profile_from_claims(claims).email
    for raw in (claims.get("preferred_username"), email.partition("@")[0]):
        if isinstance(raw, str):
            name = _NOT_IN_USERNAME.sub("-", raw.strip())[: NAME_LENGTH - 8].strip("-")
            if name and name not in found:
                found.append(name)
    return [*found, "sso-user"]
