"""The address of the client behind a request: one answer for the login lockout and the API
throttles, so neither can be dodged with a forged X-Forwarded-For."""

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str:
    """The peer's address, or with PORTAL_TRUSTED_PROXY_COUNT = N the address the N-th proxy
    from us saw (X-Forwarded-For entries left of it are the client's to forge)."""
    remote = request.META.get("REMOTE_ADDR", "") or ""
    proxies = settings.PORTAL_TRUSTED_PROXY_COUNT
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if proxies <= 0 or not forwarded:
        return remote
    hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
    if not hops:
        return remote
    return hops[-min(proxies, len(hops))]
