"""Turning a suggestion into a quota request: a draft (or a submitted request) made by the same
services as any other, so it is validated and approved like any other."""

from django.contrib.auth.models import User
from django.utils.translation import gettext, gettext_lazy

from approvals.lifecycle import request_create
from approvals.lines import LineInput
from approvals.models import QuotaRequest
from approvals.preview import RequestCheck, request_draft_check
from common.amounts import format_amount
from quotas.models import Allocation
from usage.models import Suggestion

FIGURES_IN_JUSTIFICATION = (
    ("days_of_data", gettext_lazy("days of data")),
    ("typical_daily_peak", gettext_lazy("typical daily peak")),
    ("demand_peak_max", gettext_lazy("highest daily demand")),
    ("mean", gettext_lazy("mean")),
    ("utilization_mean", gettext_lazy("mean utilization %")),
    ("borrowed_gpu_hours", gettext_lazy("borrowed unit-hours")),
    ("idle_guaranteed_gpu_hours", gettext_lazy("idle guaranteed unit-hours")),
)


def suggestion_justification(suggestion: Suggestion) -> str:
    """The justification of a request from the suggestion, in the active language: the words
    of whoever makes the request (stored as they are written, like any justification)."""
    s = suggestion
    figures = gettext("; ").join(
        f"{label} {s.figures[key]}"
        for key, label in FIGURES_IN_JUSTIFICATION
        if s.figures.get(key) is not None
    )
    lines = [
        gettext(
            "From the portal's suggestion for %(namespace)s %(resource)s from the usage of "
            "%(month)s (confidence %(confidence)s): guarantee %(guarantee_before)s → "
            "%(guarantee_after)s, cap %(cap_before)s → %(cap_after)s."
        )
        % {
            "namespace": s.team_namespace.name,
            "resource": s.resource.name,
            "month": f"{s.month:%Y-%m}",
            "confidence": s.get_confidence_display(),
            "guarantee_before": format_amount(s.current_guarantee),
            "guarantee_after": format_amount(s.suggested_guarantee),
            "cap_before": format_amount(s.current_cap),
            "cap_after": format_amount(s.suggested_cap),
        },
    ]
    if figures:
        lines.append(gettext("Figures: %(figures)s.") % {"figures": figures})
    lines += [f"- {note}" for note in s.localized_notes]
    return "\n".join(lines)


def suggestion_line(suggestion: Suggestion) -> LineInput:
    """The line a request from the suggestion asks for: the suggested guarantee and cap, the
    allocation's per-pod max kept (lowered to the new cap if above it) and its priority
    classes kept."""
    current = Allocation.objects.filter(
        team_namespace=suggestion.team_namespace, resource=suggestion.resource
    ).first()
    per_pod_max = None
    if current is not None and current.per_pod_max is not None:
        per_pod_max = min(current.per_pod_max, suggestion.suggested_cap) or None
    return LineInput(
        team_namespace_id=suggestion.team_namespace_id,
        resource_id=suggestion.resource_id,
        guarantee=suggestion.suggested_guarantee,
        cap=suggestion.suggested_cap,
        per_pod_max=per_pod_max,
        priority_classes=tuple(current.priority_classes) if current else (),
    )


def request_from_suggestion(
    *, suggestion: Suggestion, acting_user: User, submit: bool
) -> QuotaRequest:
    """A request of the suggestion's team for :func:`suggestion_line` (leads of the team and
    platform admins; request_create refuses anybody else). With ``submit`` it is submitted at
    once, and a refused submission leaves nothing behind, as for any request. One open request
    per suggestion: a second is refused naming the first."""
    return request_create(
        team=suggestion.team_namespace.team,
        acting_user=acting_user,
        justification=suggestion_justification(suggestion),
        lines=[suggestion_line(suggestion)],
        submit=submit,
        suggestion=suggestion,
    )


def suggestion_check(*, suggestion: Suggestion, acting_user: User) -> RequestCheck:
    """What a request from the suggestion would meet if submitted now (the plan's errors and
    warnings, the approval policy), refused as request_from_suggestion would refuse it;
    nothing is kept."""
    return request_draft_check(
        team=suggestion.team_namespace.team,
        acting_user=acting_user,
        justification=suggestion_justification(suggestion),
        lines=[suggestion_line(suggestion)],
        with_clusters=False,
    )
