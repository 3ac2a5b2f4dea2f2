"""The OpenAPI schema generator of the API (settings DEFAULT_SCHEMA_CLASS): drf-spectacular's,
plus the errors every operation may answer and the token scheme. How views describe themselves:
common.api.schema.
"""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from rest_framework import permissions

from common.api.schema import api_errors


class PortalAutoSchema(AutoSchema):
    """drf-spectacular's schema of a view, plus the errors every operation may answer."""

    def _idempotent(self) -> bool:
        from common.api.idempotency import METHODS, IdempotentMixin

        return isinstance(self.view, IdempotentMixin) and self.method in METHODS

    def _if_match(self) -> bool:
        return bool(getattr(self.view, "if_match", False)) and self.method in ("POST", "PATCH")

    def _always_errors(self) -> set[int]:
        codes = {400, 429}
        if self._idempotent():
            codes |= {409, 422}  # the key still in progress; the key reused with another body
        if self._if_match():
            codes.add(412)
        if not any(isinstance(p, permissions.AllowAny) for p in self.view.get_permissions()):
            codes.add(401)
        if self.method not in permissions.SAFE_METHODS:
            codes.add(403)
        if "{" in self.path or self._is_list_view():
            codes.add(404)
        return codes

    def _get_parameters(self):
        # An optional filter sent empty (`?status=`, as the pages' forms send "all") means "not
        # given", for every list; paging parameters are always numbers.
        parameters = super()._get_parameters()
        if self._idempotent():
            parameters.append(
                {
                    "in": "header",
                    "name": "Idempotency-Key",
                    "required": False,
                    "schema": {"type": "string", "maxLength": 255},
                    "description": "Any unique string: the same key with the same body answers "
                    "the first response again and does nothing twice; with another body, 422.",
                }
            )
        if self._if_match():
            parameters.append(
                {
                    "in": "header",
                    "name": "If-Match",
                    "required": False,
                    "schema": {"type": "string"},
                    "description": "The request's ETag as read: a request changed since is a 412.",
                }
            )
        for parameter in parameters:
            if (
                parameter["in"] == "query"
                and not parameter.get("required")
                and parameter["name"] not in ("page", "page_size")
            ):
                parameter["allowEmptyValue"] = True
        return parameters

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        for code, response in api_errors(*sorted(self._always_errors())).items():
            if str(code) not in responses:
                responses[str(code)] = self._get_response_for_code(response, str(code))
        return responses


class ApiTokenScheme(OpenApiAuthenticationExtension):
    """``Authorization: Bearer gqp_...`` in the schema (and the docs page's Authorize)."""

    target_class = "portal.api.auth.ApiTokenAuthentication"
    name = "token"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "gqp_<public id>_<secret>",
            "description": "A personal API token, made on the API tokens page (/tokens/).",
        }
