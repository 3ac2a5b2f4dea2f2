"""Live status of the request pages: the fragments the pages' script (static/approvals/live.js)
asks for about once a second while the tab is visible, ``GET /requests/<id>/live/`` for a
request's page and ``GET /requests/live/?ids=…`` for the rows a list page shows.

Each fragment holds the page's live parts (``data-live-part``), rendered by the same includes
and macros as the page, and is sent with an ``ETag`` of what it depends on (the requests' last
audit events and the state of their syncs, approvals.selectors.requests_live_versions); a poll
that brings back the tag it has is answered 304 after the same rights check as the page: a lead
sees their teams' requests only, anyone else gets 404, a lapsed session 403.
"""

import hashlib

from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import translation
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from approvals.access import allowed_actions
from approvals.filtersets import RequestFilterSet
from approvals.selectors import (
    request_approvals,
    request_status_counts,
    request_syncs,
    request_timeline,
    requests_listed,
    requests_live_versions,
    requests_visible_to,
)
from approvals.views.detail import approval_text, live_root
from approvals.views.list import NOT_COUNTED, PAGE_SIZE, _default_order, _rows, _status_tabs
from common.sections import jinja_section
from quotas.models import Cluster
from quotas.selectors import team_scope

# The most rows one poll of a list asks about: a page shows PAGE_SIZE.
MAX_IDS = 100


def _etag(user, parts) -> str:
    """A weak tag of what a fragment shows: the versions read, for this user and language."""
    seen = repr((user.pk, translation.get_language(), parts)).encode()
    return f'W/"live-{hashlib.sha256(seen).hexdigest()[:24]}"'


def _unchanged(request: HttpRequest, etag: str) -> bool:
    asked = request.headers.get("If-None-Match", "")
    return etag in [tag.strip() for tag in asked.split(",")]


def _not_modified(etag: str) -> HttpResponse:
    response = HttpResponse(status=304)
    response["ETag"] = etag
    return response


def _refused(request: HttpRequest, message: str, status: int) -> HttpResponse:
    return render(request, "approvals/live/refused.html", {"message": message}, status=status)


def _signed_in(request: HttpRequest) -> HttpResponse | None:
    """A poll from a page whose session ended: 403 (not the login page's redirect)."""
    if request.user.is_authenticated and request.user.is_active:
        return None
    return _refused(request, _("Your session has ended: log in again to see live updates."), 403)


@never_cache
@require_GET
def request_live(request: HttpRequest, pk: int) -> HttpResponse:
    """The live parts of a request's page: its status, approvals, syncs and timeline."""
    if (refused := _signed_in(request)) is not None:
        return refused
    user = request.user
    qr = requests_visible_to(user).select_related("team", "requested_by").filter(pk=pk).first()
    if qr is None:
        raise Http404(_("No such request among those you may see."))
    # Read before the parts: a change in between shows now and moves the tag next time.
    etag = _etag(user, (qr.status, requests_live_versions([qr.pk])[qr.pk]))
    if _unchanged(request, etag):
        return _not_modified(etag)
    approvals = request_approvals(qr)
    syncs = request_syncs(qr)
    allowed = allowed_actions(user, qr)
    context = {
        "qr": qr,
        "approvals": approvals,
        "approval_text": approval_text(qr, len(approvals)),
        "approved_by_me": "reject" in allowed and "approve" not in allowed,
        "syncs": syncs,
        "timeline": request_timeline(qr),
        "live": live_root(qr, syncs=syncs, allowed=allowed),
    }
    response = render(request, "approvals/live/request.html", context)
    response["ETag"] = etag
    return response


def _ids(raw: str) -> list[int] | None:
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if len(parts) > MAX_IDS or not all(p.isascii() and p.isdigit() and len(p) < 19 for p in parts):
        return None
    return sorted({int(p) for p in parts})


@never_cache
@require_GET
def request_list_live(request: HttpRequest) -> HttpResponse:
    """The live parts of a list page: the status and approvals of the rows it shows (``ids``,
    wherever they are now: a request approved in the queue shows so before it leaves it), the
    status tabs' counts, and whether the page's filters now select other requests."""
    if (refused := _signed_in(request)) is not None:
        return refused
    ids = _ids(request.GET.get("ids", ""))
    if ids is None:
        message = _("ids: give at most %(n)s request numbers, separated by commas") % {"n": MAX_IDS}
        return _refused(request, message, 400)
    user = request.user
    scope = team_scope(user)
    params = request.GET.copy()
    params.pop("ids", None)
    request.GET = params  # the list's own filters, as the tabs' links keep them
    filters = RequestFilterSet(
        params or None,
        queryset=requests_visible_to(user, scope=scope),
        request=request,
        teams=scope.teams_visible(),
    )
    if errors := filters.filter_errors():
        message = " ".join([_("These filters cannot be used; fix them to see requests:"), *errors])
        return _refused(request, message, 400)
    cleaned = filters.form.cleaned_data if filters.is_bound else {}
    counted = filters.counted_queryset(requests_visible_to(user, scope=scope), NOT_COUNTED)
    counts = request_status_counts(counted)
    now_listed = filters.qs
    if not cleaned.get("ordering"):
        now_listed = now_listed.order_by(*_default_order(cleaned))
    # The page of the list as the page itself pages it (approvals.views.list).
    paginator = Paginator(now_listed.values_list("pk", flat=True), PAGE_SIZE)
    status = cleaned.get("status")
    paginator.count = counts.get(status, 0) if status else sum(counts.values())
    now_ids = list(paginator.get_page(params.get("page")).object_list)
    visible = requests_visible_to(user, scope=scope)
    shown = list(visible.filter(pk__in=ids).order_by("pk").values_list("pk", "status"))
    # A waiting request's "no longer fits" follows every change of the clusters' plans.
    plans = list(Cluster.objects.order_by("pk").values_list("pk", "plan_generation"))
    versions = requests_live_versions([pk for pk, _status in shown])
    etag = _etag(user, (sorted(counts.items()), now_ids, shown, plans, sorted(versions.items())))
    if _unchanged(request, etag):
        return _not_modified(etag)
    context = {
        "rows": _rows(requests_listed([pk for pk, _ in shown])),
        "tabs": _status_tabs(request, counts, params.get("status", "")),
        "list_changed": set(now_ids) != set(ids),
        "query": params.urlencode(),
    }
    html = jinja_section(request, "approvals/_request_list_live.html", context)
    response = HttpResponse(html)
    response["ETag"] = etag
    return response
