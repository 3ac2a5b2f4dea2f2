"""The API's OpenAPI schema as the apps write it: the one error shape, the errors an operation
documents, and the conventions every API view follows so ``manage.py spectacular --validate
--fail-on-warn`` stays silent (tests/portal/test_api_schema.py runs it). The generator itself
(portal.api.schema.PortalAutoSchema, in settings) adds the errors every operation may answer.

How to describe an endpoint:

- Request bodies come from a serializer (``request=SomeInputSerializer`` in ``extend_schema``,
  or the view's ``serializer_class``); the view validates ``request.data`` with that same
  serializer, never by hand. Answers name their serializer (``responses={200: Out}``).
- Every operation gets the errors that can always happen, without writing them: 400 (bad query
  parameters or body), 401 (no or a bad token), 429 (throttled); 403 on writes (a role or CSRF
  refusal); 404 on paths with an id and on lists (a page past the last). Add the others where
  they apply with ``api_errors``: ``responses={200: Out, **api_errors(403, 409)}``.
- Give one example of a body sent (``OpenApiExample``, ``request_only=True``) where there is one.
- List views use ``common.api.pagination.ApiPagination`` (the default) and a FilterSet
  (``filterset_class``); both document their query parameters themselves. An optional query
  parameter sent empty means "not given" (``allowEmptyValue`` in the schema).
"""

from typing import Any

from drf_spectacular.utils import OpenApiExample, OpenApiResponse
from rest_framework import serializers


class ErrorSerializer(serializers.Serializer):
    """Every refusal of the API: a message naming the field and the rule, and details."""

    message = serializers.CharField(
        help_text="What was refused and why, naming the field first (`status: ...`)."
    )
    extra = serializers.DictField(
        help_text=(
            "Details: `field` (the parameter or body field refused, e.g. `lines[0].cap`), "
            "`code`, `errors` (every field error as `{field, message}`), and facts of the "
            "refusal (`retry_after`, `request`, `changes`, ...)."
        )
    )


ERRORS: dict[int, tuple[str, dict[str, Any]]] = {
    400: (
        "Bad input: a query parameter, the body or one of its fields breaks a rule (named in "
        "`extra.field`).",
        {
            "message": "status: 'bogus' is not one of draft, submitted, approved, ...",
            "extra": {"field": "status", "code": "invalid_choice"},
        },
    ),
    401: (
        "No credentials, or a token that is unknown, expired or revoked.",
        {"message": "invalid API token", "extra": {"code": "authentication_failed"}},
    ),
    403: (
        "Authenticated, but this role may not do this.",
        {
            "message": "only platform admins decide quota requests",
            "extra": {"code": "permission_denied"},
        },
    ),
    404: (
        "Nothing with this id is visible to you, or the page is past the last.",
        {
            "message": "request #42 does not exist or is not visible to you",
            "extra": {"code": "not_found"},
        },
    ),
    409: (
        "The object's state does not allow this (e.g. deciding a withdrawn request).",
        {
            "message": "request #42 is withdrawn; it cannot become approved",
            "extra": {"field": "status", "status": "withdrawn"},
        },
    ),
    412: (
        "`If-Match` does not name the current version: someone changed it first.",
        {"message": "If-Match: the request changed since you read it", "extra": {}},
    ),
    422: (
        "The same `Idempotency-Key` was sent before with another body.",
        {"message": "Idempotency-Key: used before with another body", "extra": {}},
    ),
    429: (
        "Too many requests: wait `extra.retry_after` seconds (also in `Retry-After`).",
        {
            "message": "Request was throttled. Expected available in 12 seconds.",
            "extra": {"code": "throttled", "retry_after": 12},
        },
    ),
}


def api_errors(*codes: int) -> dict[int, OpenApiResponse]:
    """Error responses for ``extend_schema(responses=...)``, each with its example."""
    out = {}
    for code in codes:
        description, example = ERRORS[code]
        out[code] = OpenApiResponse(
            ErrorSerializer,
            description=description,
            examples=[
                OpenApiExample(
                    f"error {code}", value=example, response_only=True, status_codes=[code]
                )
            ],
        )
    return out
