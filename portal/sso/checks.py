"""`manage.py check` refuses a single sign-on configuration nobody could sign in with."""

from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import Error, Warning, register

from portal.sso.mapping import team_pattern_problem


@register()
def sso_settings_check(app_configs=None, **kwargs):
    problems = []
    issuer = settings.OIDC_ISSUER
    if issuer:
        parts = urlsplit(issuer)
        if parts.scheme not in ("https", "http") or not parts.netloc or parts.query:
            problems.append(
                Error(
                    "OIDC_ISSUER must be the provider's http(s) URL without a query",
                    id="portal.E101",
                )
            )
        elif parts.scheme == "http" and parts.hostname not in ("127.0.0.1", "localhost", "::1"):
            problems.append(
                Warning(
                    "OIDC_ISSUER is plain HTTP: tokens and codes would cross the network "
                    "unencrypted",
                    hint="use the provider's https:// address",
                    id="portal.W101",
                )
            )
        if not settings.OIDC_RP_CLIENT_ID:
            problems.append(Error("OIDC_ISSUER is set but OIDC_CLIENT_ID is not", id="portal.E102"))
        if not settings.OIDC_RP_CLIENT_SECRET:
            problems.append(
                Error(
                    "OIDC_ISSUER is set but neither OIDC_CLIENT_SECRET nor "
                    "OIDC_CLIENT_SECRET_FILE is",
                    id="portal.E103",
                )
            )
        if settings.OIDC_CA_FILE and not _readable(settings.OIDC_CA_FILE):
            problems.append(
                Error(f"OIDC_CA_FILE {settings.OIDC_CA_FILE} cannot be read", id="portal.E104")
            )
        for name in ("OIDC_TEAM_LEAD_GROUP", "OIDC_TEAM_MEMBER_GROUP"):
            problem = team_pattern_problem(getattr(settings, name))
            if problem:
                problems.append(Error(f"{name}: {problem}", id="portal.E105"))
        if settings.OIDC_DISCOVERY_SECONDS < 0 or settings.OIDC_TIMEOUT <= 0:
            problems.append(
                Error(
                    "OIDC_DISCOVERY_SECONDS must be 0 or more and OIDC_TIMEOUT more than 0",
                    id="portal.E106",
                )
            )
    elif settings.OIDC_RP_CLIENT_ID or settings.OIDC_RP_CLIENT_SECRET:
        problems.append(
            Error(
                "OIDC_CLIENT_ID or OIDC_CLIENT_SECRET is set but OIDC_ISSUER is not",
                hint="set OIDC_ISSUER to switch single sign-on on",
                id="portal.E107",
            )
        )
    if not settings.PASSWORD_LOGIN and not issuer:
        problems.append(
            Error(
                "PASSWORD_LOGIN is off and single sign-on is not configured: nobody could sign in",
                hint="set OIDC_ISSUER (and the client) or PASSWORD_LOGIN=true",
                id="portal.E108",
            )
        )
    return problems


def _readable(path: str) -> bool:
    try:
        with open(path, "rb"):
            return True
    except OSError:
        return False
