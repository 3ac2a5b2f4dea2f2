"""The request list: the platform admins' queue (every team) and, for leads and members, the
requests of their teams. Filtered by the API's own FilterSet, sorted, counted per status,
paged; waiting requests that no longer fit the plan say why. A fixed number of queries
whatever the number of requests and teams (the fit check reads each cluster touched once).
"""

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import F
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _

from approvals.filtersets import RequestFilterSet
from approvals.models import QuotaRequest
from approvals.selectors import request_status_counts, requests_listed_for, requests_visible_to
from approvals.validation import requests_fit_problems
from quotas.selectors import teams_requestable_by

S = QuotaRequest.Status
PAGE_SIZE = 25
# Parameters that do not narrow which requests are counted per status.
NOT_COUNTED = ("status", "ordering", "page")


def _default_order(cleaned: dict) -> list:
    """The pending queue (submitted, or waiting for me) oldest submitted first, as admins
    work through it; anything else newest first."""
    if cleaned.get("status") == S.SUBMITTED or cleaned.get("waiting"):
        return [F("submitted_at").asc(nulls_last=True), "id"]
    return ["-created_at", "-id"]


def _query(params, **changes) -> str:
    query = params.copy()
    for name, value in changes.items():
        query.pop(name, None)
        if value:
            query[name] = value
    return query.urlencode()


def _status_tabs(request: HttpRequest, counts: dict[str, int], current: str) -> list[dict]:
    """ "All" and each status with its count (statuses with none are left out)."""
    params = request.GET.copy()
    params.pop("page", None)
    tabs = [
        {
            "label": _("All"),
            "count": sum(counts.values()),
            "query": _query(params, status=""),
            "current": not current,
            "status": "all",
        }
    ]
    for value, label in S.choices:
        if counts.get(value):
            tabs.append(
                {
                    "label": label,
                    "count": counts[value],
                    "query": _query(params, status=value),
                    "current": current == value,
                    "status": value,
                }
            )
    return tabs


def _status_counts(request: HttpRequest) -> dict[str, int]:
    """Per status, the requests the other filters select (so each tab says what it holds)."""
    data = request.GET.copy()
    for name in NOT_COUNTED:
        data.pop(name, None)
    counting = RequestFilterSet(
        data or None, queryset=requests_visible_to(request.user), request=request
    )
    if counting.filter_errors():
        return {}
    return request_status_counts(counting.qs)


def _mark_fits(page) -> None:
    """The same answer the API's fits_plan and the approval give, for the page's waiting
    requests at once."""
    problems = requests_fit_problems([qr for qr in page if qr.status == S.SUBMITTED])
    for qr in page:
        qr.plan_problems = [f.message for f in problems.get(qr.pk, [])]


@login_required
def request_list(request: HttpRequest) -> HttpResponse:
    context, status = _request_list_context(request)
    return render(request, "approvals/request_list.html", context, status=status)


def _request_list_context(request: HttpRequest) -> tuple[dict, int]:
    user = request.user
    filters = RequestFilterSet(
        request.GET or None, queryset=requests_listed_for(user), request=request
    )
    errors = filters.filter_errors()
    if errors:
        # A bad filter selects nothing rather than guess: the message says what to fix.
        rows = QuotaRequest.objects.none()
        cleaned = {}
    else:
        cleaned = filters.form.cleaned_data if filters.is_bound else {}
        rows = filters.qs
        if not cleaned.get("ordering"):
            rows = rows.order_by(*_default_order(cleaned))
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    _mark_fits(page)
    params = request.GET.copy()
    params.pop("page", None)
    return (
        {
            "filters": filters.form,
            "filter_errors": errors,
            "page": page,
            "query": params.urlencode(),
            "tabs": _status_tabs(request, _status_counts(request), request.GET.get("status", "")),
            "is_queue": bool(cleaned.get("status") == S.SUBMITTED or cleaned.get("waiting")),
            "may_request": teams_requestable_by(user).exists(),
        },
        400 if errors else 200,
    )
