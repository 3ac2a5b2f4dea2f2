"""The suggestions page (/suggestions/), through the same selectors and filters as the API, and
its button: POST /requests/from-suggestion/<id>/ turns a suggestion into a draft or a submitted
request, then shows that request (or the one made from it already)."""

from decimal import Decimal

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods

from approvals.selectors import impact_mig_layouts, request_impact, requests_visible_to
from approvals.suggestions import (
    request_from_suggestion,
    suggestion_check,
    suggestion_justification,
    suggestion_line,
)
from approvals.views.form import policy_text
from approvals.whatif import lines_what_if
from common.amounts import format_amount
from common.errors import ApplicationError, PermissionDenied
from quotas.models import Allocation, Cluster
from quotas.selectors import teams_requestable_by, teams_visible_to
from usage.filtersets import SuggestionFilterSet
from usage.models import SuggestionBacktest
from usage.suggest import (
    FLAG_BELOW_FLOOR,
    FLAG_GROWING,
    FLAG_IDLE,
    FLAG_LOW_UTILIZATION,
    FLAG_NO_DATA,
    FLAG_NOT_OVER,
    FLAG_SCALED,
    FLAG_SHARE,
    FLAG_THIN,
)
from usage.suggestion_selectors import backtests_recent, suggestions_list, suggestions_visible_to
from usage.units import hour_labels


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
            "flags": [FLAG_WORDS.get(flag, flag) for flag in s.flags],
        }
        for s in page
    ]
    cluster = filters.form.cleaned_data.get("cluster") if not errors else None
    context = {
        "rows": rows,
        "page": page,
        "backtests": backtest_panels(user, cluster=cluster),
        "clusters": Cluster.objects.order_by("name"),
        "teams": teams_visible_to(user).order_by("slug"),
        "selected": {k: request.GET.get(k, "") for k in ("cluster", "team", "month")},
        "errors": errors,
        "error_fields": set(filters.form.errors),
    }
    return render(request, "approvals/suggestions.html", context, status=400 if errors else 200)


BACKTEST_MONTHS = 6
TENTH = Decimal("0.1")
_SUMMED = ("demand", "covered", "borrowed", "blocked", "idle", "guaranteed", "cost")


def _tenth(value: Decimal) -> str:
    return format_amount(value.quantize(TENTH))


def _percent(part: Decimal, whole: Decimal) -> str:
    return _tenth(part * 100 / whole) + "%" if whole else "—"


def _backtest_cells(policy: str, f: dict[str, Decimal]) -> dict:
    """One policy's line of a panel, its cells formatted once here (``f``: the unit-hours and
    cost of one month, or of several summed)."""
    return {
        "policy": policy,
        "name": SuggestionBacktest.Policy(policy).label,
        "idle": _tenth(f["idle"]),
        "idle_share": _percent(f["idle"], f["guaranteed"]),
        "covered": _tenth(f["covered"]),
        "covered_share": _percent(f["covered"], f["demand"]),
        "blocked": _tenth(f["blocked"]),
        "blocked_share": _percent(f["blocked"], f["demand"]),
        "cost": _tenth(f["cost"]),
    }


def backtest_panels(user, *, cluster=None) -> list[dict]:
    """The "How suggestions did" panels: per cluster the user may see (or ``cluster``) and
    resource, the last BACKTEST_MONTHS months backtested, newest first, each policy's idle
    guaranteed hours, demand covered by guarantee and blocked by caps, and cost; and the same
    over those months together. One query (usage.suggestion_selectors.backtests_recent)."""
    panels: dict[str, dict] = {}
    for row in backtests_recent(user, cluster=cluster, months=BACKTEST_MONTHS):
        panel = panels.setdefault(row.cluster.name, {"cluster": row.cluster.name, "by": {}})
        resource = panel["by"].get(row.resource_id)
        if resource is None:
            words = hour_labels(kind=row.resource.kind, unit=row.resource.unit)
            resource = panel["by"][row.resource_id] = {
                "resource": row.resource.name,
                "hours_label": words.hours,
                "idle_label": words.idle,
                "prices": row.prices,  # the newest month's: rows come newest first
                "months": {},
                "sums": {},
            }
        month = resource["months"].setdefault(
            row.month,
            {
                "month": f"{row.month:%Y-%m}",
                "demand": _tenth(row.demand),
                "namespaces": row.namespaces,
                "lines": [],
            },
        )
        figures = {name: getattr(row, name) for name in _SUMMED}
        month["lines"].append(_backtest_cells(row.policy, figures))
        sums = resource["sums"].setdefault(row.policy, dict.fromkeys(_SUMMED, Decimal(0)))
        for name in _SUMMED:
            sums[name] += figures[name]
    out = []
    for panel in panels.values():
        resources = []
        for resource in panel["by"].values():
            months = list(resource.pop("months").values())
            sums = resource.pop("sums")
            resources.append(
                {
                    **resource,
                    "months": months,
                    "together": [_backtest_cells(p, sums[p]) for p in sums],
                    "together_demand": _tenth(next(iter(sums.values()))["demand"]),
                }
            )
        out.append({"cluster": panel["cluster"], "resources": resources})
    return out


# A suggestion's flags (usage/suggest.py) in words a lead reads.
FLAG_WORDS = {
    FLAG_IDLE: gettext_lazy("guarantee mostly idle"),
    FLAG_LOW_UTILIZATION: gettext_lazy("GPUs held but little used"),
    FLAG_SCALED: gettext_lazy("held down by the cluster's capacity"),
    FLAG_SHARE: gettext_lazy("cap held at the cluster's share"),
    FLAG_BELOW_FLOOR: gettext_lazy("guarantee below 80% of the typical daily peak"),
    FLAG_GROWING: gettext_lazy("usage growing"),
    FLAG_THIN: gettext_lazy("few days of data"),
    FLAG_NOT_OVER: gettext_lazy("month not over yet"),
    FLAG_NO_DATA: gettext_lazy("no usage data"),
}

FIGURE_LABELS = [
    ("days_of_data", gettext_lazy("days of data")),
    ("typical_daily_peak", gettext_lazy("typical daily peak (p95 of daily peaks)")),
    ("peak_max", gettext_lazy("highest daily peak")),
    ("demand_peak_max", gettext_lazy("highest daily demand (peak + pending)")),
    ("p95_median", gettext_lazy("median daily p95")),
    ("mean", gettext_lazy("mean allocated")),
    ("recent_level", gettext_lazy("recent level (median daily mean, last 7 days)")),
    ("floor", gettext_lazy("80% of the typical daily peak")),
    ("weekly_means", gettext_lazy("weekly means")),
    ("growth_per_week", gettext_lazy("growth per week")),
    ("utilization_mean", gettext_lazy("mean GPU utilization %")),
    ("gpu_hours", gettext_lazy("GPU-hours")),
    ("borrowed_gpu_hours", gettext_lazy("borrowed GPU-hours")),
    ("idle_guaranteed_gpu_hours", gettext_lazy("idle guaranteed GPU-hours")),
    ("pending_peak", gettext_lazy("highest pending")),
    ("pending_wait_max_seconds", gettext_lazy("longest pending wait (s)")),
    ("pending_wait_mean_seconds", gettext_lazy("mean pending wait (s)")),
    ("evictions", gettext_lazy("evicted pods")),
    ("unscaled_guarantee", gettext_lazy("guarantee before scaling")),
    ("busy_days", gettext_lazy("days with demand")),
    ("trend_per_week", gettext_lazy("trend per week (daily mean demand)")),
    ("trend_r2", gettext_lazy("how well the trend fits (R²)")),
    ("forecast_peak", gettext_lazy("highest forecast demand next month")),
    ("expected_covered_share", gettext_lazy("forecast demand covered by the guarantee %")),
    ("expected_idle_share", gettext_lazy("forecast guarantee idle %")),
    ("expected_blocked_share", gettext_lazy("forecast demand above the cap %")),
    ("expected_cost", gettext_lazy("expected cost next month")),
    ("prices", gettext_lazy("prices")),
    ("basis", gettext_lazy("how")),
]


def _hour_figure_labels(resource) -> dict[str, str]:
    """The hour and utilization figures of a resource that is not a whole GPU, by what they
    count (slice-hours of a MIG slice); a GPU's keep FIGURE_LABELS."""
    if resource.kind == "gpu":
        return {}
    words = hour_labels(kind=resource.kind, unit=resource.unit)

    def lower_first(text: str) -> str:
        return text[:1].lower() + text[1:]

    return {
        "utilization_mean": lower_first(words.utilization) + " %",
        "gpu_hours": words.hours,
        "borrowed_gpu_hours": lower_first(words.borrowed),
        "idle_guaranteed_gpu_hours": lower_first(words.idle),
    }


def _figure_rows(s) -> list[tuple[str, str]]:
    out = []
    by_unit = _hour_figure_labels(s.resource)
    figures = s.localized_figures
    for key, label in FIGURE_LABELS:
        label = by_unit.get(key, label)
        value = figures.get(key)
        if value is None:
            continue
        if isinstance(value, list):
            value = ", ".join(str(v) for v in value)
        out.append((str(label), str(value)))
    return out


@login_required
@require_http_methods(["GET", "POST"])
def suggestion_request(request: HttpRequest, pk: int) -> HttpResponse:
    """GET: what a request from the suggestion would change and meet (nothing is made);
    POST: make it, a draft or submitted."""
    suggestion = suggestions_visible_to(request.user).filter(pk=pk).first()
    if suggestion is None:
        raise Http404(_("no such suggestion"))
    if request.method == "GET":
        return _confirm_page(request, suggestion)
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


def _confirm_page(request: HttpRequest, suggestion) -> HttpResponse:
    """Ask first: the allocation as it is and as the suggestion would make it, and what a
    submitted request would meet (the plan's errors and warnings, who must approve)."""
    line = suggestion_line(suggestion)
    current = Allocation.objects.filter(
        team_namespace=suggestion.team_namespace, resource=suggestion.resource
    ).first()
    try:
        check = suggestion_check(suggestion=suggestion, acting_user=request.user)
    except PermissionDenied as exc:
        raise DjangoPermissionDenied(exc.message) from None
    except ApplicationError as exc:
        check, refusal = None, exc.message
    else:
        refusal = ""
    impact = (
        request_impact(check.lines, team_id=suggestion.team_namespace.team_id) if check else None
    )
    context = {
        "s": suggestion,
        "current": current,
        "line": line,
        "justification": suggestion_justification(suggestion),
        "refusal": refusal,
        "check": check,
        "policy_text": policy_text(check) if check else "",
        "impact": impact,
        "mig_layouts": impact_mig_layouts(impact or []),
        # What the suggested values would have made of the last month, before one asks.
        "what_if": lines_what_if(check.lines, saved=False) if check else [],
    }
    return render(request, "approvals/suggestion_confirm.html", context)
