"""One exception handler for the API: every refusal is ``{"message": ..., "extra": {...}}``.

ApplicationError subclasses keep their status (400, 403, 409) and their extra (``field``,
``errors``, ``warnings``); DRF's own errors (bad input, authentication, 404, 405) are turned
into the same shape, with every field error listed under ``extra.errors``.
"""

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils.translation import gettext as _
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from common.errors import ApplicationError


def _path(prefix: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{prefix}[{key}]"
    if key == "non_field_errors":
        return prefix
    return f"{prefix}.{key}" if prefix else str(key)


def field_errors(detail: Any, prefix: str = "") -> list[dict[str, str]]:
    """DRF's nested error detail as a flat list: [{"field": "lines[0].namespace", ...}]."""
    if isinstance(detail, dict):
        return [e for key, value in detail.items() for e in field_errors(value, _path(prefix, key))]
    if isinstance(detail, list):
        if all(isinstance(item, str) for item in detail):
            return [{"field": prefix, "message": str(item)} for item in detail]
        return [
            e for index, item in enumerate(detail) for e in field_errors(item, _path(prefix, index))
        ]
    return [{"field": prefix, "message": str(detail)}]


def _validation_response(detail: Any, status_code: int = status.HTTP_400_BAD_REQUEST) -> Response:
    errors = field_errors(detail)
    if not errors:
        return Response({"message": _("invalid input"), "extra": {}}, status=status_code)
    first = errors[0]
    message = f"{first['field']}: {first['message']}" if first["field"] else first["message"]
    extra: dict[str, Any] = {"errors": errors}
    if first["field"]:
        extra["field"] = first["field"]
    return Response({"message": message, "extra": extra}, status=status_code)


def exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, ApplicationError):
        return Response({"message": exc.message, "extra": exc.extra}, status=exc.status_code)
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response(
            {
                "message": _("body: request body larger than %(limit)s bytes") % {"limit": limit},
                "extra": {"field": "body", "code": "too_large"},
            },
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, SuspiciousOperation):  # Django's own refusals of a request: 400
        return Response(
            {"message": str(exc), "extra": {"code": "bad_request"}},
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else exc.messages
        return _validation_response(detail)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None  # a bug, not user input: let Django report it
    if isinstance(exc, exceptions.ValidationError):
        return _validation_response(exc.detail, response.status_code)
    detail = getattr(exc, "detail", None)
    if isinstance(detail, dict | list):
        message = "; ".join(e["message"] for e in field_errors(detail)) or str(exc)
    else:
        message = str(detail if detail is not None else exc)
    if not message:  # e.g. a 404 raised without words (an unknown ?format=)
        message = str(getattr(exc, "default_detail", "")) or _("request refused")
    extra: dict[str, Any] = {}
    code = getattr(exc, "default_code", None)
    if code:
        extra["code"] = getattr(detail, "code", None) or code
    if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
        extra["retry_after"] = int(exc.wait)  # the Retry-After header says the same
    response.data = {"message": message, "extra": extra}
    return response
