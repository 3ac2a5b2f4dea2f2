"""The provider's endpoints: those the settings name, the rest from its discovery document
(``<issuer>/.well-known/openid-configuration``), which is read with a timeout, checked (its
issuer must be the configured one, every endpoint an http(s) URL) and kept in the shared cache
for OIDC_DISCOVERY_SECONDS. The one module of the portal that reads it."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests
from django.conf import settings
from django.core.cache import cache

logger = logging.getLogger(__name__)

DOCUMENT_PATH = "/.well-known/openid-configuration"
# setting -> field of the discovery document
_FIELDS = {
    "authorization": ("OIDC_OP_AUTHORIZATION_ENDPOINT", "authorization_endpoint"),
    "token": ("OIDC_OP_TOKEN_ENDPOINT", "token_endpoint"),
    "jwks": ("OIDC_OP_JWKS_ENDPOINT", "jwks_uri"),
    "userinfo": ("OIDC_OP_USER_ENDPOINT", "userinfo_endpoint"),
    "end_session": ("OIDC_OP_LOGOUT_ENDPOINT", "end_session_endpoint"),
}
REQUIRED = ("authorization", "token", "jwks")


class ProviderUnavailable(Exception):
    """The provider's endpoints cannot be known (unreachable, or a document that is not its
    own): the message says why, without secrets."""


@dataclass(frozen=True)
class Endpoints:
    authorization: str
    token: str
    jwks: str
    userinfo: str = ""
    end_session: str = ""


def verify() -> bool | str:
    """What ``requests`` checks the provider's certificate against."""
    return settings.OIDC_CA_FILE or True


def _is_url(value: object) -> bool:
    if not isinstance(value, str) or len(value) > 2000:
        return False
    parts = urlsplit(value)
    return parts.scheme in ("https", "http") and bool(parts.netloc)


def _cache_key(issuer: str) -> str:
    return "sso-discovery:" + hashlib.sha256(issuer.encode()).hexdigest()[:32]


def _document(issuer: str) -> dict:
    url = issuer + DOCUMENT_PATH
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT, verify=verify())
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise ProviderUnavailable(
            f"the discovery document {url} cannot be read: {type(exc).__name__}"
        ) from None
    if not isinstance(document, dict):
        raise ProviderUnavailable(f"the discovery document {url} is not a JSON object")
    if document.get("issuer") != issuer:
        # OpenID Connect Discovery 4.3: a document naming another issuer is not this one's.
        raise ProviderUnavailable(
            f"the discovery document {url} names another issuer than OIDC_ISSUER"
        )
    return document


def provider_endpoints() -> Endpoints:
    """The endpoints to use now; raises ProviderUnavailable."""
    issuer = settings.OIDC_ISSUER
    found = {name: getattr(settings, setting) for name, (setting, _f) in _FIELDS.items()}
    if all(found[name] for name in REQUIRED):
        return Endpoints(**found)
    key = _cache_key(issuer)
    cached = cache.get(key)
    if not isinstance(cached, dict):
        document = _document(issuer)
        cached = {}
        for name, (_setting, field) in _FIELDS.items():
            value = document.get(field, "")
            if value and not _is_url(value):
                raise ProviderUnavailable(f"the discovery document's {field} is not a URL")
            cached[name] = value or ""
        missing = [_FIELDS[name][1] for name in REQUIRED if not cached[name]]
        if missing:
            raise ProviderUnavailable(f"the discovery document has no {', '.join(missing)}")
        cache.set(key, cached, settings.OIDC_DISCOVERY_SECONDS)
    return Endpoints(**{name: found[name] or cached[name] for name in _FIELDS})


def forget_endpoints() -> None:
    """Drop the kept document (the next sign-in reads it again)."""
    cache.delete(_cache_key(settings.OIDC_ISSUER))
