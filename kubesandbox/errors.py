"""Kubernetes ``Status`` error responses, raised as :class:`ApiError` inside the sandbox."""

from __future__ import annotations

from typing import Any

from kubesandbox.schemas import FieldError

_CAUSE_REASONS = (
    ("Required value", "FieldValueRequired"),
    ("Unsupported value", "FieldValueNotSupported"),
    ("Too long", "FieldValueTooLong"),
    ("Too many", "FieldValueTooMany"),
    ("Forbidden", "FieldValueForbidden"),
    ("Duplicate value", "FieldValueDuplicate"),
    ("Internal error", "InternalError"),
)


class ApiError(Exception):
    """An error answer of the API, rendered as a ``Status`` body."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:  # a relayed webhook denial has none
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, name: str, group: str = "") -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{_qualified(plural, group)} "{name}" not found',
        {"name": name, "group": group, "kind": plural} if group else {"name": name, "kind": plural},
    )


def already_exists(plural: str, name: str, group: str = "") -> ApiError:
    details = (
        {"name": name, "group": group, "kind": plural} if group else {"name": name, "kind": plural}
    )
    return ApiError(
        409, "AlreadyExists", f'{_qualified(plural, group)} "{name}" already exists', details
    )


def conflict(plural: str, name: str, group: str = "") -> ApiError:
    details = (
        {"name": name, "group": group, "kind": plural} if group else {"name": name, "kind": plural}
    )
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": '
        "the object has been "
        "modified; please apply your changes to the latest version and try again",
        details,
    )


def namespace_terminating(plural: str, name: str, namespace: str, group: str = "") -> ApiError:
    """403 of the NamespaceLifecycle admission plugin: no new objects in a terminating namespace."""
    details: dict[str, Any] = {"name": name, "kind": plural}
    if group:
        details["group"] = group
    details["causes"] = [
        {
            "reason": "NamespaceTerminating",
            "message": f"namespace {namespace} is being terminated",
            "field": "metadata.namespace",
        }
    ]
    return ApiError(
        403,
        "Forbidden",
        f'{_qualified(plural, group)} "{name}" is forbidden: unable to create new content in '
        f"namespace {namespace} because it is being terminated",
        details,
    )


def cause_reason(message: str) -> str:
    for prefix, reason in _CAUSE_REASONS:
        if message.startswith(prefix):
            return reason
    return "FieldValueInvalid"


def invalid(kind: str, name: str, errors: list[FieldError], group: str = "") -> ApiError:
    """422 ``Invalid``, worded like kube-apiserver's ``<Kind> "<name>" is invalid: ...``."""
    rendered = [f"{e.field}: {e.message}" if e.field else e.message for e in errors]
    summary = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    qualified_kind = f"{kind}.{group}" if group else kind
    details: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "causes": [
            {"reason": cause_reason(e.message), "message": e.message, "field": e.field}
            for e in errors
        ],
    }
    if group:
        details["group"] = group
    return ApiError(422, "Invalid", f'{qualified_kind} "{name}" is invalid: {summary}', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message, {})


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        # The sandbox speaks JSON (and YAML) only: no protobuf, no CBOR.
        "the body of the request was in an unknown format - accepted media types include: "
        f'application/json, application/yaml; got "{content_type}"',
    )


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def forbidden(message: str, details: dict[str, Any] | None = None) -> ApiError:
    return ApiError(403, "Forbidden", message, details)


def internal(message: str) -> ApiError:
    return ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        {"causes": [{"message": message}]},
    )
