"""``Authorization: Bearer gqp_...`` authentication for the REST API."""

from rest_framework import authentication, exceptions

from portal.tokens import TokenRefused, api_token_user


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None  # not ours: let the session (or nobody) authenticate
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(
                "malformed Authorization header: expected 'Bearer <token>'"
            )
        try:
            token = header[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed("invalid API token") from None
        try:
            return api_token_user(token)
        except TokenRefused as exc:
            raise exceptions.AuthenticationFailed(str(exc)) from None

    def authenticate_header(self, request) -> str:
        # Makes DRF answer 401 (not 403) to requests without credentials.
        return f'{self.keyword} realm="api"'
