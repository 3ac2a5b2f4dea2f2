"""The login page (a password form unless PASSWORD_LOGIN is off, a single sign-on button when
OIDC_ISSUER is set), the start of a single sign-on and its callback, and the logout, which ends
at the provider too where it has an end-session endpoint (RP-initiated logout).

Every refusal at the callback (a state this browser did not start, the provider's error, a
token that does not verify, an account the portal refuses) ends on the login page with its
message; what the log gets names no token, code or secret."""

from __future__ import annotations

import logging
import re
import time
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import admin, auth, messages
from django.contrib.auth import views as auth_views
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import resolve_url
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views import View
from django.views.decorators.http import require_POST
from mozilla_django_oidc.views import OIDCAuthenticationRequestView

from portal.sso.backends import SSO_BACKEND, SsoBackend
from portal.sso.discovery import ProviderUnavailable, provider_endpoints
from portal.sso.services import SsoRefused

logger = logging.getLogger(__name__)

# How long a started sign-in may take at the provider before its state is refused.
STATE_SECONDS = 15 * 60
_ERROR_CODE = re.compile(r"[a-z_]{1,40}")


def _refused(request: HttpRequest, code: str) -> HttpResponse:
    messages.error(request, SsoRefused(code).message)
    return HttpResponseRedirect(reverse("login"))


class LoginView(auth_views.LoginView):
    """Django's login page with the single sign-on button; without PASSWORD_LOGIN no form,
    and a password POST is refused before any password is checked."""

    redirect_authenticated_user = True

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context.update(
            sso_enabled=settings.SSO_ENABLED,
            sso_provider_name=settings.OIDC_PROVIDER_NAME,
            password_login=settings.PASSWORD_LOGIN,
        )
        return context

    def post(self, request, *args, **kwargs):
        if not settings.PASSWORD_LOGIN:
            context = self.get_context_data(password_refused=True)
            return self.render_to_response(context, status=403)
        return super().post(request, *args, **kwargs)


def admin_login(request: HttpRequest) -> HttpResponse:
    """The Django admin's login, or with PASSWORD_LOGIN off the portal's (single sign-on),
    back to the admin page asked for."""
    if settings.PASSWORD_LOGIN:
        return admin.site.login(request)
    next_url = request.GET.get("next") or reverse("admin:index")
    return HttpResponseRedirect(f"{reverse('login')}?{urlencode({'next': next_url})}")


class SsoStart(OIDCAuthenticationRequestView):
    """Sends the browser to the provider with state, nonce and a PKCE challenge (kept in the
    session by mozilla-django-oidc), and the page to come back to if it is the portal's own."""

    def __init__(self, *args, **kwargs):
        View.__init__(self, *args, **kwargs)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_OP_AUTH_ENDPOINT = ""

    def get(self, request):
        if not settings.SSO_ENABLED:
            raise Http404(SsoRefused("off").message)
        try:
            self.OIDC_OP_AUTH_ENDPOINT = provider_endpoints().authorization
        except ProviderUnavailable as exc:
            logger.warning("single sign-on cannot start: %s", exc)
            return _refused(request, "provider")
        return super().get(request)


def _safe_next(request: HttpRequest, url: str | None) -> str:
    if url and url_has_allowed_host_and_scheme(
        url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return url
    return resolve_url(settings.LOGIN_REDIRECT_URL)


class SsoCallback(View):
    """Where the provider sends the browser back: the state must be one this session started
    (and not long ago), then the backend exchanges the code and signs the user in."""

    http_method_names = ["get"]

    def get(self, request):
        if not settings.SSO_ENABLED:
            raise Http404(SsoRefused("off").message)
        states = request.session.get("oidc_states")
        state = request.GET.get("state", "")
        entry = states.pop(state, None) if isinstance(states, dict) and state else None
        if entry is not None:
            # Used once: a replayed callback finds no state.
            request.session.modified = True
            request.session.save()
        error = request.GET.get("error")
        if error:
            code = error if _ERROR_CODE.fullmatch(error) else "(not a code)"
            logger.info("single sign-on: the provider answered error %s", code)
            return _refused(request, "denied")
        if not isinstance(entry, dict) or time.time() - entry.get("added_on", 0) > STATE_SECONDS:
            logger.warning("single sign-on refused: a state this session did not start")
            return _refused(request, "state")
        next_url = request.session.get("oidc_login_next")
        try:
            user = SsoBackend().authenticate(
                request,
                nonce=entry.get("nonce"),
                code_verifier=entry.get("code_verifier"),
                sso_callback=True,
            )
        except SsoRefused as exc:
            logger.warning("single sign-on refused: %s", exc)
            return _refused(request, exc.code)
        if user is None:
            return _refused(request, "token")
        id_token = request.session.get("oidc_id_token")
        auth.login(request, user, backend=SSO_BACKEND)
        if id_token:
            # auth.login starts a fresh session when another user was signed in.
            request.session["oidc_id_token"] = id_token
        request.session.pop("oidc_login_next", None)
        return HttpResponseRedirect(_safe_next(request, next_url))


@require_POST
def logout(request: HttpRequest) -> HttpResponse:
    """Ends the portal's session; a session opened by single sign-on then ends at the
    provider too, where it has an end-session endpoint (with the ID token as a hint)."""
    by_sso = request.session.get(auth.BACKEND_SESSION_KEY) == SSO_BACKEND
    id_token = request.session.get("oidc_id_token")
    auth.logout(request)
    target = resolve_url(settings.LOGOUT_REDIRECT_URL)
    if not (by_sso and settings.SSO_ENABLED):
        return HttpResponseRedirect(target)
    try:
        end_session = provider_endpoints().end_session
    except ProviderUnavailable as exc:
        logger.warning("single sign-on logout at the provider skipped: %s", exc)
        end_session = ""
    if not end_session:
        return HttpResponseRedirect(target)
    params = {
        "client_id": settings.OIDC_RP_CLIENT_ID,
        "post_logout_redirect_uri": request.build_absolute_uri(target),
    }
    if id_token:
        params["id_token_hint"] = id_token
    separator = "&" if "?" in end_session else "?"
    return HttpResponseRedirect(end_session + separator + urlencode(params))
