"""The login lockout around django-axes: the page a locked-out login gets (429 with
Retry-After), the user name attempts count under, and the wide lock of one user name across
addresses or one address across user names."""

import math

from axes.helpers import get_cool_off
from axes.models import AccessAttempt, AccessLog
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db.models import Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext as _

from portal.client import client_address


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials=None
) -> HttpResponse:
    cool_off = get_cool_off(request)
    seconds = math.ceil(cool_off.total_seconds()) if cool_off else None
    response = render(
        request,
        "registration/locked_out.html",
        {"failure_limit": settings.AXES_FAILURE_LIMIT, "minutes": math.ceil((seconds or 0) / 60)},
        status=settings.AXES_HTTP_RESPONSE_CODE,
    )
    if seconds:
        response["Retry-After"] = str(seconds)
    return response


def lockout_username(request: HttpRequest, credentials: dict | None = None) -> str | None:
    """The user name attempts are counted under (AXES_USERNAME_CALLABLE): cut to the longest a
    user name can be, since the login form passes any length on and the attempts table keeps
    255 characters (a longer name was a 500 on PostgreSQL)."""
    field = settings.AXES_USERNAME_FORM_FIELD
    if credentials:
        username = credentials.get(field)
    else:
        username = getattr(request, "data", request.POST).get(field)
    if not isinstance(username, str):
        return username
    return username[: User._meta.get_field("username").max_length]


def _failures(**where) -> int:
    since = timezone.now() - settings.AXES_COOLOFF_TIME
    total = AccessAttempt.objects.filter(attempt_time__gte=since, **where).aggregate(
        n=Sum("failures_since_start")
    )["n"]
    return total or 0


class WideLockoutBackend:
    """Second in AUTHENTICATION_BACKENDS, after axes' lock of the pair (user name, address):
    refuses a login once the user name has failed LOGIN_LOCKOUT_WIDE_FAILURES times from all
    addresses within the cool-off (one account guessed from many places), or the address has
    for all user names (many accounts guessed from one place), unless this user has signed in
    from this address before, so neither a distributed guesser nor a neighbour behind the same
    address keeps a person out of their account. Authenticates nobody itself (and has no
    ``get_user``: no session names it as its backend)."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None or not settings.AXES_ENABLED:
            return None
        name = lockout_username(request, {settings.AXES_USERNAME_FORM_FIELD: username})
        address = getattr(request, "axes_ip_address", None) or client_address(request)
        if not isinstance(name, str) or not name:
            return None
        limit = settings.LOGIN_LOCKOUT_WIDE_FAILURES
        if _failures(username=name) < limit and _failures(ip_address=address) < limit:
            return None
        if AccessLog.objects.filter(username=name, ip_address=address).exists():
            return None
        # As axes does for its own lock: the middleware answers with the lockout page, and the
        # refused attempt is not counted (the lock does not extend itself).
        request.axes_locked_out = True
        raise PermissionDenied(_("Locked out: too many failed sign-ins for this name or address."))
