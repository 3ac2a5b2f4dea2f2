"""Errors users can cause, rendered once as {"message", "extra"} in the UI and the API."""

from typing import Any


class ApplicationError(Exception):
    """A refusal the user can act on; the message names the field and the rule."""

    status_code = 400

    def __init__(
        self, message: str, *, field: str | None = None, extra: dict[str, Any] | None = None
    ):
        super().__init__(message)
        self.message = message
        self.field = field
        self.extra = dict(extra or {})
        if field:
            self.extra.setdefault("field", field)


class ValidationFailed(ApplicationError):
    """Input breaks a rule; ``extra["errors"]`` may list several field errors."""


class PermissionDenied(ApplicationError):
    status_code = 403


class NotAllowed(ApplicationError):
    """The object is in a state where this action is not possible."""

    status_code = 409
