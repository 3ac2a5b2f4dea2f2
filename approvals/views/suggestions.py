"""The suggestions page (/suggestions/), through the same selectors and filters as the API, and
its button: POST /requests/from-suggestion/<id>/ turns a suggestion into a draft or a submitted
request, then shows that request (or the one made from it already)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from approvals.selectors import requests_visible_to
from approvals.suggestions import request_from_suggestion
from common.errors import ApplicationError, PermissionDenied
from quotas.models import Cluster
from quotas.selectors import teams_requestable_by, teams_visible_to
from usage.filtersets import SuggestionFilterSet
from usage.suggestion_selectors import suggestions_list, suggestions_visible_to


@login_required
def suggestion_list(request: HttpRequest) -> HttpResponse:
    user = request.user
    # The same FilterSet as GET /api/v1/suggestions/: a bad value is named, with a 400.
    filters = SuggestionFilterSet(request.GET, queryset=suggestions_list(user), request=request)
    errors = filters.filter_errors()
    page = Paginator(filters.qs, 50).get_page(request.GET.get("page"))
    # suggestion_requestable_by's answer for every row at once (one query, not one a row).
    requestable = set(teams_requestable_by(user).values_list("pk", flat=True))
    rows = [
        {
            "s": s,
            "may_request": s.team_namespace.team_id in requestable,
            "figures": _figure_rows(s),
        }
        for s in page
    ]
    context = {
        "rows": rows,
        "page": page,
        "clusters": Cluster.objects.order_by("name"),
        "teams": teams_visible_to(user).order_by("slug"),
        "selected": {k: request.GET.get(k, "") for k in ("cluster", "team", "month")},
        "errors": errors,
        "error_fields": set(filters.form.errors),
    }
    return render(request, "approvals/suggestions.html", context, status=400 if errors else 200)


FIGURE_LABELS = [
    ("days_of_data", "days of data"),
    ("typical_daily_peak", "typical daily peak (p95 of daily peaks)"),
    ("peak_max", "highest daily peak"),
    ("demand_peak_max", "highest daily demand (peak + pending)"),
    ("p95_median", "median daily p95"),
    ("mean", "mean allocated"),
    ("recent_level", "recent level (median daily mean, last 7 days)"),
    ("floor", "80% of the typical daily peak"),
    ("weekly_means", "weekly means"),
    ("growth_per_week", "growth per week"),
    ("utilization_mean", "mean GPU utilization %"),
    ("gpu_hours", "GPU-hours"),
    ("borrowed_gpu_hours", "borrowed GPU-hours"),
    ("idle_guaranteed_gpu_hours", "idle guaranteed GPU-hours"),
    ("pending_peak", "highest pending"),
    ("pending_wait_max_seconds", "longest pending wait (s)"),
    ("pending_wait_mean_seconds", "mean pending wait (s)"),
    ("evictions", "evicted pods"),
    ("unscaled_guarantee", "guarantee before scaling"),
    ("basis", "how"),
]


def _figure_rows(s) -> list[tuple[str, str]]:
    out = []
    for key, label in FIGURE_LABELS:
        value = s.figures.get(key)
        if value is None:
            continue
        if isinstance(value, list):
            value = ", ".join(str(v) for v in value)
        out.append((label, str(value)))
    return out


@login_required
@require_POST
def suggestion_request(request: HttpRequest, pk: int) -> HttpResponse:
    suggestion = suggestions_visible_to(request.user).filter(pk=pk).first()
    if suggestion is None:
        raise Http404(_("no such suggestion"))
    submit = request.POST.get("submit") == "1"
    try:
        qr = request_from_suggestion(suggestion=suggestion, acting_user=request.user, submit=submit)
    except PermissionDenied as exc:
        raise DjangoPermissionDenied(exc.message) from None
    except ApplicationError as exc:
        # Refused (a rule the plan breaks now, or already requested): nothing was made.
        messages.error(request, _("not requested: %(problem)s") % {"problem": exc.message})
        earlier = exc.extra.get("request")
        if earlier and requests_visible_to(request.user).filter(pk=earlier).exists():
            return redirect("requests-detail", pk=earlier)
        return redirect("suggestions-list")
    if submit:
        done = _("Request #%(id)s submitted from the suggestion.")
    else:
        done = _("Request #%(id)s saved as a draft from the suggestion.")
    messages.success(request, done % {"id": qr.pk})
    return redirect("requests-detail", pk=qr.pk)
