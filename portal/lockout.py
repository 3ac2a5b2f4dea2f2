"""The page a locked-out login gets (django-axes' AXES_LOCKOUT_CALLABLE): 429 with Retry-After."""

import math

from axes.helpers import get_cool_off
from django.conf import settings
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
