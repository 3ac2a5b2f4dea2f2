"""The page a locked-out login gets (django-axes' AXES_LOCKOUT_CALLABLE): 429 with Retry-After."""

import math

from axes.helpers import get_cool_off
from django.conf import settings
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


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
