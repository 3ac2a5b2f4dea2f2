"""API throttles: per token, per client address, and failed token attempts per address.

Counts live in Django's cache (Redis in production, so every web process shares them; see
settings). Each is a fixed-window counter kept with the cache's atomic add/incr, not DRF's
timestamp list: a get-then-set list loses counts when two processes answer the same client at
once. Rates come from REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] (scopes "token", "address",
"token_failure"), read on each use so a changed setting takes effect.
"""

import math
import time

from django.core.cache import cache
from django.utils.translation import gettext as _
from rest_framework.exceptions import Throttled
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle

from portal.client import client_address
from portal.models import ApiToken

PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """'20/min' -> (20, 60)."""
    count, _, period = rate.partition("/")
    return int(count), PERIODS[period.strip()[:1]]


def _rate(scope: str) -> tuple[int, int] | None:
    rate = api_settings.DEFAULT_THROTTLE_RATES.get(scope)
    return parse_rate(rate) if rate else None


def window_hit(scope: str, ident: str, *, count: bool = True) -> float | None:
    """Count one hit of ``ident`` in ``scope``'s current window (or only look, with
    count=False); seconds until the window ends if the rate is exceeded, else None."""
    rate = _rate(scope)
    if rate is None:
        return None
    limit, period = rate
    now = time.time()
    window = int(now // period)
    key = f"throttle:{scope}:{ident}:{window}"
    if count:
        cache.add(key, 0, timeout=period + 1)
        try:
            hits = cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.add(key, 1, timeout=period + 1)
            hits = 1
    else:
        hits = cache.get(key, 0)
        if hits < limit:
            return None
        hits += 1
    if hits > limit:
        return (window + 1) * period - now
    return None


class _WindowThrottle(BaseThrottle):
    scope = ""

    def ident(self, request) -> str | None:
        raise NotImplementedError

    def allow_request(self, request, view) -> bool:
        ident = self.ident(request)
        self._wait = None if ident is None else window_hit(self.scope, ident)
        return self._wait is None

    def wait(self) -> float | None:
        return math.ceil(self._wait) if self._wait is not None else None


class TokenRateThrottle(_WindowThrottle):
    """Requests per API token (requests with a session are counted by address only)."""

    scope = "token"

    def ident(self, request) -> str | None:
        return str(request.auth.pk) if isinstance(request.auth, ApiToken) else None


class AddressRateThrottle(_WindowThrottle):
    """Requests per client address, authenticated or not."""

    scope = "address"

    def ident(self, request) -> str | None:
        return client_address(request) or "unknown"


def token_failures_check(request) -> None:
    """Throttled if this address has failed too many token attempts in the current window."""
    wait = window_hit("token_failure", client_address(request) or "unknown", count=False)
    if wait is not None:
        raise Throttled(
            wait=math.ceil(wait),
            detail=_("too many failed API token attempts from this address."),
        )


def token_failure_record(request) -> None:
    window_hit("token_failure", client_address(request) or "unknown")
