"""The main part of a costly page, kept and shown again while nothing it was computed from
has changed.

A page's main part (what its view computes from the database and renders, below the header)
is kept in the cache under what it depends on:

- the data version (common.dataversion): any committed write, by any means, gives a new
  version, so a part computed before it is never shown after it;
- who asks (the user: what they may see is decided from rows the version covers), the page
  and its query string, the language and the time zone;
- the current time slot of PORTAL_PAGE_CACHE_SECONDS: what depends on the clock alone ("3
  minutes ago", a grant whose end has passed without any write yet) is at most that old.

The header (navigation, the language switch with its CSRF token, messages) is rendered for each
request as always. A part holding a CSRF token is never kept: tokens belong to one session.
Nothing is kept or reused inside a transaction, on SQLite (the demo: no data version), or with
PORTAL_PAGE_CACHE_SECONDS = 0.
"""

import hashlib
import logging
import time
from collections.abc import Callable

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils import timezone, translation
from django.utils.safestring import SafeString, mark_safe

from common.dataversion import data_version

logger = logging.getLogger(__name__)

# Computes the part: its HTML and the page's HTTP status.
Compute = Callable[[], tuple[str, int]]


def _seconds() -> int:
    return int(getattr(settings, "PORTAL_PAGE_CACHE_SECONDS", 60))


def page_key(request: HttpRequest, name: str) -> str | None:
    """The key the part is kept under, or None when it must be computed."""
    seconds = _seconds()
    if seconds <= 0:
        return None
    version = data_version()
    if version is None:
        return None
    asked = "\n".join(
        [
            name,
            version,
            str(request.user.pk),
            translation.get_language() or "",
            timezone.get_current_timezone_name(),
            request.path,
            request.META.get("QUERY_STRING", ""),
        ]
    )
    digest = hashlib.sha256(asked.encode()).hexdigest()[:32]
    return f"page:{name}:{int(time.time() // seconds)}:{digest}"


def kept_content(request: HttpRequest, name: str, compute: Compute) -> tuple[SafeString, int]:
    """The page's main part and status: kept if the same was computed at this data version,
    in this time slot, for the same user and query; else computed (and kept)."""
    key = page_key(request, name)
    if key is not None:
        try:
            kept = cache.get(key)
        except Exception:  # the cache is down: the page is computed, as without one
            logger.warning("page cache unavailable; %s computed", name, exc_info=True)
            key = kept = None
        if kept is not None:
            html, status = kept
            return mark_safe(html), status  # noqa: S308 - our own rendered template
    html, status = compute()
    if key is not None and "csrfmiddlewaretoken" not in html:
        try:
            cache.set(key, (str(html), status), timeout=2 * _seconds())
        except Exception:
            logger.warning("page cache unavailable; %s not kept", name, exc_info=True)
    return mark_safe(html), status  # noqa: S308 - our own rendered template


def render_kept(
    request: HttpRequest,
    name: str,
    *,
    page: str,
    part: str,
    context: Callable[[], tuple[dict, int]],
    page_context: dict | None = None,
) -> HttpResponse:
    """The page template ``page`` around its main part: ``part`` rendered with ``context()``
    (the context and the status), kept as :func:`kept_content` says. ``page`` shows the part
    as ``{{ content }}``, with ``page_context`` (what its title needs)."""

    def compute() -> tuple[str, int]:
        values, status = context()
        return render_to_string(part, values, request=request), status

    content, status = kept_content(request, name, compute)
    return render(request, page, {**(page_context or {}), "content": content}, status=status)
