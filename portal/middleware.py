"""Middleware of the portal shell: the Content-Security-Policy header, a 400 for request
parameters no page or API can store or compare (a NUL character: PostgreSQL refuses it in text,
which would otherwise surface as a 500, or as a CSV export that breaks after its headers), and
the signed-in user read with their groups.

The CSP is a small middleware rather than a package: the policy is one fixed header (nothing
inline, no nonces needed), and Django 6.0 brings the same thing built in (SECURE_CSP), which can
replace it on upgrade.
"""

from collections.abc import Callable

from django.conf import settings
from django.db.models import prefetch_related_objects
from django.http import HttpRequest, HttpResponse, JsonResponse


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response
        self.header = (
            "Content-Security-Policy-Report-Only"
            if settings.PORTAL_CSP_REPORT_ONLY
            else "Content-Security-Policy"
        )

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if settings.PORTAL_CSP and self.header not in response:
            response[self.header] = settings.PORTAL_CSP
        return response


def refused_parameter(request: HttpRequest) -> tuple[str, str] | None:
    """(where, name) of the first query, form or cookie parameter holding a NUL, else None."""
    sources = [("query parameter", request.GET), ("cookie", request.COOKIES)]
    if request.method == "POST" and request.content_type in (
        "application/x-www-form-urlencoded",
        "multipart/form-data",
    ):
        sources.append(("form field", request.POST))
    for where, params in sources:
        items = (
            params.lists() if hasattr(params, "lists") else ((k, [v]) for k, v in params.items())
        )
        for name, values in items:
            if "\x00" in name or any("\x00" in value for value in values if isinstance(value, str)):
                return where, name.replace("\x00", "\\x00")
    return None


class RejectHostileParametersMiddleware:
    """400 ``{"message", "extra"}`` for a NUL in any query, form or cookie parameter."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        refused = refused_parameter(request)
        if refused is None:
            return self.get_response(request)
        where, name = refused
        return JsonResponse(
            {
                "message": f"{name}: {where} must not contain NUL (\\x00) characters",
                "extra": {"field": name, "code": "null_character"},
            },
            status=400,
        )


class UserGroupsMiddleware:
    """The signed-in user's groups read with the user, in one query for the request: the role
    checks (quotas.roles) then answer from them instead of asking the database at each check.
    They are as fresh as the user row itself, both read for this request, and Django drops them
    when the groups are changed through the user (``user.groups.set()``)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            prefetch_related_objects([user], "groups")
        return self.get_response(request)
