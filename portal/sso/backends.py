"""The two ways into the portal's pages: the password (PasswordBackend, refused when
PASSWORD_LOGIN is off) and single sign-on (SsoBackend: the authorization code flow of
mozilla-django-oidc, with the ID token's issuer, audience and authorized party checked too, and
the user found by their identity at the provider, never by e-mail alone)."""

from __future__ import annotations

import logging

import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import SuspiciousOperation
from django.urls import reverse
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import absolutify

from portal.sso.claims import id_token_problem
from portal.sso.discovery import ProviderUnavailable, provider_endpoints, verify
from portal.sso.mapping import GroupMapping
from portal.sso.services import SsoRefused, sso_sign_in

logger = logging.getLogger(__name__)

PASSWORD_BACKEND = "portal.sso.backends.PasswordBackend"  # noqa: S105 (a path)
SSO_BACKEND = "portal.sso.backends.SsoBackend"


class PasswordBackend(ModelBackend):
    """Django's user name and password, unless PASSWORD_LOGIN is off. An account made by
    single sign-on has no usable password, which no password matches (check_password), so it
    cannot be entered with one; its sessions (and those of a password-less account an admin
    made) stay valid, as ModelBackend keeps them."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if not settings.PASSWORD_LOGIN:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


class SsoBackend(OIDCAuthenticationBackend):
    """Signs in the person the provider's ID token names. Called by the callback view with the
    nonce and PKCE verifier the sign-in started with (keyword-only, so a password form's
    credentials never reach it). Refusals are raised as SsoRefused for the view to show."""

    def __init__(self, *args, **kwargs):
        # The library reads every endpoint here; this backend is built for each session's
        # request, so the endpoints are looked up only when someone signs in.
        self.UserModel = get_user_model()
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None
        self.OIDC_OP_TOKEN_ENDPOINT = ""
        self.OIDC_OP_USER_ENDPOINT = ""
        self.OIDC_OP_JWKS_ENDPOINT = ""

    @staticmethod
    def get_settings(attr, *args):
        if attr == "OIDC_VERIFY_SSL":
            return verify()  # the same CA as the discovery document's
        return OIDCAuthenticationBackend.get_settings(attr, *args)

    def authenticate(self, request, *, nonce=None, code_verifier=None, sso_callback=False):
        if not (sso_callback and request is not None and settings.SSO_ENABLED):
            return None
        self.request = request
        code, state = request.GET.get("code"), request.GET.get("state")
        if not code or not state:
            raise SsoRefused("state", "no code or state at the callback")
        try:
            endpoints = provider_endpoints()
        except ProviderUnavailable as exc:
            raise SsoRefused("provider", str(exc)) from None
        self.OIDC_OP_TOKEN_ENDPOINT = endpoints.token
        self.OIDC_OP_JWKS_ENDPOINT = endpoints.jwks
        self.OIDC_OP_USER_ENDPOINT = endpoints.userinfo
        payload = {
            "client_id": self.OIDC_RP_CLIENT_ID,
            "client_secret": self.OIDC_RP_CLIENT_SECRET,
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": absolutify(request, reverse(settings.OIDC_AUTHENTICATION_CALLBACK_URL)),
        }
        if code_verifier is not None:
            payload["code_verifier"] = code_verifier
        try:
            tokens = self.get_token(payload)
        except requests.HTTPError as exc:
            status = exc.response.status_code if exc.response is not None else "?"
            # The library's message holds the provider's answer; only its status is logged.
            raise SsoRefused("token", f"the token endpoint answered {status}") from None
        except (requests.RequestException, ValueError) as exc:
            raise SsoRefused("provider", f"the token endpoint: {type(exc).__name__}") from None
        id_token = tokens.get("id_token") if isinstance(tokens, dict) else None
        if not isinstance(id_token, str):
            raise SsoRefused("token", "the token endpoint gave no ID token")
        try:
            claims = self.verify_token(id_token, nonce=nonce)
        except SuspiciousOperation as exc:
            raise SsoRefused("token", str(exc)) from None
        except jwt.PyJWTError as exc:
            raise SsoRefused("token", f"the ID token: {type(exc).__name__}") from None
        except (requests.RequestException, ValueError, KeyError) as exc:
            raise SsoRefused("provider", f"the provider's keys: {type(exc).__name__}") from None
        problem = id_token_problem(
            claims, issuer=settings.OIDC_ISSUER, client_id=self.OIDC_RP_CLIENT_ID
        )
        if problem:
            raise SsoRefused("token", problem)
        claims = dict(claims)
        access_token = tokens.get("access_token")
        if endpoints.userinfo and isinstance(access_token, str):
            claims = self._with_userinfo(claims, access_token, id_token)
        if endpoints.end_session:
            # Only for the logout's id_token_hint (RP-initiated logout); no other token is kept.
            request.session["oidc_id_token"] = id_token
        user = sso_sign_in(
            claims=claims,
            issuer=settings.OIDC_ISSUER,
            mapping=GroupMapping.from_settings(settings),
            link_by_email=settings.OIDC_LINK_BY_EMAIL,
            groups_claim=settings.OIDC_GROUPS_CLAIM,
        )
        logger.info("single sign-on: %s signed in", user.get_username())
        return user

    def _with_userinfo(self, claims: dict, access_token: str, id_token: str) -> dict:
        """The ID token's claims with the userinfo endpoint's (OpenID Connect Core 5.3.2: its
        subject must be the ID token's); the ID token's issuer, audience and subject stay."""
        try:
            info = self.get_userinfo(access_token, id_token, claims)
        except (requests.RequestException, ValueError, SuspiciousOperation) as exc:
            raise SsoRefused("provider", f"the userinfo endpoint: {type(exc).__name__}") from None
        if not isinstance(info, dict) or info.get("sub") != claims["sub"]:
            raise SsoRefused("token", "the userinfo endpoint names another subject")
        kept = {k: claims[k] for k in ("iss", "aud", "sub", "azp", "exp", "nonce") if k in claims}
        return {**claims, **info, **kept}
