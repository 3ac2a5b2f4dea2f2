"""``Authorization: Bearer gqp_...`` authentication for the REST API."""

from django.utils.translation import gettext as _
from rest_framework import authentication, exceptions

from portal.api.throttling import token_failure_record, token_failures_check
from portal.tokens import TokenRefused, api_token_user


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None  # not ours: let the session (or nobody) authenticate
        # An address that failed too often is refused before its token is even looked at, or
        # the throttle would still tell a right guess from a wrong one.
        token_failures_check(request)
        try:
            if len(header) != 2:
                raise TokenRefused(_("malformed Authorization header: expected 'Bearer <token>'"))
            try:
                token = header[1].decode()
            except UnicodeError:
                raise TokenRefused(_("invalid API token")) from None
            return api_token_user(token)
        except TokenRefused as exc:
            token_failure_record(request)
            raise exceptions.AuthenticationFailed(str(exc)) from None

    def authenticate_header(self, request) -> str:
        # Makes DRF answer 401 (not 403) to requests without credentials.
        return f'{self.keyword} realm="api"'
