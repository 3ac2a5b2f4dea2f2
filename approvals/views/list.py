"""The request list: the platform admins' queue (every team) and, for leads and members, the
requests of their teams. Filtered by the API's own FilterSet, sorted, counted per status,
paged; waiting requests that no longer fit the plan say why. A fixed number of queries
whatever the number of requests and teams (the fit check reads each cluster touched once).
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import F
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.timesince import timesince
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST

from approvals.access import may_decide
from approvals.bulk import MAX_BULK, requests_decide_many
from approvals.filtersets import RequestFilterSet
from approvals.models import QuotaRequest
from approvals.selectors import (
    ListedLine,
    ListedRequest,
    request_status_counts,
    requests_listed,
    requests_visible_to,
)
from approvals.validation import requests_fit_problems
from common.amounts import format_amount
from common.choices import choice_labels
from common.errors import ApplicationError
from common.sections import jinja_section
from quotas.selectors import team_scope

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


def _status_counts(filters: RequestFilterSet, visible) -> dict[str, int]:
    """Per status, the visible requests the other filters select (so each tab says what it
    holds): the list's own filters, cleaned once, without the status."""
    counted = filters.counted_queryset(visible, leave_out=NOT_COUNTED)
    return {} if counted is None else request_status_counts(counted)


def _plan_problems(requests: list[ListedRequest]) -> dict[int, list[str]]:
    """The same answer the API's fits_plan and the approval give, for the page's waiting
    requests at once."""
    waiting = [qr for qr in requests if qr.status == S.SUBMITTED]
    problems = requests_fit_problems(
        [QuotaRequest(pk=qr.pk) for qr in waiting],
        lines_of={qr.pk: list(qr.plan_lines) for qr in waiting},
    )
    return {pk: [f.message for f in found] for pk, found in problems.items()}


def _minute(moment) -> str:
    """A moment as the page writes it (``|date:"Y-m-d H:i"``, in the current time zone)."""
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M")


def _amount(value) -> str:
    """``|amount``: no amount is written as nothing."""
    return "" if value is None else format_amount(value)


def _line_text(line: ListedLine) -> dict:
    return {
        "namespace": line.namespace,
        "cluster": line.cluster,
        "resource": line.resource,
        "current": (_amount(line.current_guarantee), _amount(line.current_cap)),
        "requested": (_amount(line.requested_guarantee), _amount(line.requested_cap)),
        "decided": None
        if line.decided_cap is None
        else _("decided %(g)s / %(c)s")
        % {"g": _amount(line.decided_guarantee), "c": _amount(line.decided_cap)},
    }


def _until(qr: ListedRequest) -> str:
    if qr.is_extension:
        return _("grant #%(grant)s: end %(end)s → %(new)s") % {
            "grant": qr.extends_id,
            "end": _minute(qr.extends_ends_at),
            "new": _minute(qr.ends_at),
        }
    return _("until %(end)s") % {"end": _minute(qr.ends_at)} if qr.ends_at else ""


def _rows(requests: list[ListedRequest], *, user=None) -> list[dict]:
    """Each request of the page as its row writes it: labels, moments and amounts formatted
    once here, not by template filters per cell. ``user``: the admin of the queue, whose
    rows waiting for someone else's decision can be selected."""
    problems = _plan_problems(requests)
    status_labels = choice_labels(QuotaRequest, "status")
    kind_labels = choice_labels(QuotaRequest, "kind")
    rows = []
    for qr in requests:
        rows.append(
            {
                "pk": qr.pk,
                "url": reverse("requests-detail", args=[qr.pk]),
                "team": qr.team,
                "status": qr.status,
                "status_label": status_labels.get(qr.status, qr.status),
                "plan_problems": "; ".join(problems.get(qr.pk, [])),
                "kind_label": kind_labels.get(qr.kind, qr.kind),
                "until": _until(qr),
                "selectable": user is not None
                and qr.status == S.SUBMITTED
                and qr.requested_by_id != user.pk,
                "lines": [_line_text(line) for line in qr.lines],
                "requester": qr.requester,
                "submitted": _minute(qr.submitted_at) if qr.submitted_at else "",
                "age": _("%(age)s ago") % {"age": timesince(qr.submitted_at)}
                if qr.submitted_at
                else "",
                "approvals": _("automatic")
                if qr.auto_approved
                else _("%(given)s of %(needed)s")
                % {"given": qr.approvals_given, "needed": qr.approvals_needed},
            }
        )
    return rows


def _pager_text(page) -> str:
    n = page.paginator.count
    return ngettext(
        "page %(number)s of %(total)s (%(n)s request)",
        "page %(number)s of %(total)s (%(n)s requests)",
        n,
    ) % {"number": page.number, "total": page.paginator.num_pages, "n": n}


@login_required
def request_list(request: HttpRequest) -> HttpResponse:
    context, status = _request_list_context(request)
    # The list itself (tabs, filters, rows, pager) is the page's heaviest part.
    context["request_list"] = jinja_section(request, "approvals/_request_list.html", context)
    return render(request, "approvals/request_list.html", context, status=status)


def _request_list_context(request: HttpRequest) -> tuple[dict, int]:
    user = request.user
    # The user's teams, read once for the rows, the status counts, the team filter's choices
    # and the "new request" link.
    scope = team_scope(user)
    filters = RequestFilterSet(
        request.GET or None,
        queryset=requests_visible_to(user, scope=scope),
        request=request,
        teams=scope.teams_visible(),
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
    counts = _status_counts(filters, requests_visible_to(user, scope=scope))
    # The page's ids, then its rows by one statement (requests_listed).
    paginator = Paginator(rows.values_list("pk", flat=True), PAGE_SIZE)
    if not errors:
        # The rows are the counted requests of the status asked for (all: every status), so
        # the tabs' counts give the pager's total without a count of its own.
        status = cleaned.get("status")
        paginator.count = counts.get(status, 0) if status else sum(counts.values())
    page = paginator.get_page(request.GET.get("page"))
    params = request.GET.copy()
    params.pop("page", None)
    is_queue = bool(cleaned.get("status") == S.SUBMITTED or cleaned.get("waiting"))
    # The queue of a platform admin: several requests decided at once (requests_bulk).
    bulk = is_queue and may_decide(user)
    return (
        {
            "filters": filters.form,
            "filter_errors": errors,
            "page": page,
            "rows": _rows(requests_listed(list(page)), user=user if bulk else None),
            "bulk": bulk,
            "bulk_next": request.get_full_path(),
            "query": params.urlencode(),
            "tabs": _status_tabs(request, counts, request.GET.get("status", "")),
            "is_queue": is_queue,
            "may_request": scope.may_request_any(),
            "pager_text": _pager_text(page),
            # Its rows' status and the tabs follow by themselves (approvals.views.live).
            "live_url": f"{reverse('requests-live-list')}?{request.GET.urlencode()}",
        },
        400 if errors else 200,
    )


# --- several at once ------------------------------------------------------------------------

_BULK_TAGS = {
    "approved": "success",
    "rejected": "success",
    "waiting": "warning",
    "refused": "error",
}


@login_required
@require_POST
def requests_bulk(request: HttpRequest) -> HttpResponse:
    """Approve or reject the requests ticked in the queue, each as a single decision would
    (approvals.bulk); the queue then says, per request, what became of it."""
    back = request.POST.get("next", "")
    # Back to the queue it was sent from: a path of this site only (redirect() would take
    # any other word for a view name).
    if not (
        back.startswith("/")
        and url_has_allowed_host_and_scheme(back, {request.get_host()}, request.is_secure())
    ):
        back = f"{reverse('requests-list')}?waiting=on"
    if not may_decide(request.user):
        return render(
            request,
            "approvals/refused.html",
            {"message": _("only platform admins decide quota requests")},
            status=403,
        )
    ids = []
    for value in request.POST.getlist("ids")[: MAX_BULK + 1]:
        if not value.isascii() or not value.isdigit() or len(value) > 18:
            messages.error(
                request, _("ids: %(value)s is not a request number") % {"value": value[:40]}
            )
            return HttpResponseRedirect(back)
        ids.append(int(value))
    action = request.POST.get("action", "")
    try:
        outcomes = requests_decide_many(
            request_ids=ids,
            acting_user=request.user,
            action=action,
            comment=request.POST.get("comment", ""),
        )
    except ApplicationError as exc:
        messages.error(request, exc.message, extra_tags="bulk-refused")
        return HttpResponseRedirect(back)
    for outcome in outcomes:
        text = _("Request #%(id)s: %(outcome)s") % {
            "id": outcome.request_id,
            "outcome": outcome.message,
        }
        messages.add_message(
            request,
            {"success": messages.SUCCESS, "warning": messages.WARNING, "error": messages.ERROR}[
                _BULK_TAGS[outcome.outcome]
            ],
            text,
            extra_tags=f"bulk-{outcome.outcome} bulk-request-{outcome.request_id}",
        )
    return HttpResponseRedirect(back)
