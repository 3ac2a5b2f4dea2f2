"""Ends the sessions a password opened once PASSWORD_LOGIN is off (Django keeps the backend
that authenticated a session under BACKEND_SESSION_KEY). API tokens carry no session and
are left alone."""

from collections.abc import Callable

from django.conf import settings
from django.contrib import auth
from django.http import HttpRequest, HttpResponse

from portal.sso.backends import SSO_BACKEND


class PasswordSessionsEndMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not settings.PASSWORD_LOGIN:
            backend = request.session.get(auth.BACKEND_SESSION_KEY)
            if backend and backend != SSO_BACKEND:
                auth.logout(request)
        return self.get_response(request)
