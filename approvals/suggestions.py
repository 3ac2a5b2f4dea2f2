"""Turning a suggestion into a quota request: a draft (or a submitted request) made by the same
services as any other, so it is validated and approved like any other."""

from django.contrib.auth.models import User

from approvals.lifecycle import request_create
from approvals.lines import LineInput
from approvals.models import QuotaRequest
from common.amounts import format_amount
from quotas.models import Allocation
from usage.models import Suggestion

FIGURES_IN_JUSTIFICATION = (
    ("days_of_data", "days of data"),
    ("typical_daily_peak", "typical daily peak"),
    ("demand_peak_max", "highest daily demand"),
    ("mean", "mean"),
    ("utilization_mean", "mean utilization %"),
    ("borrowed_gpu_hours", "borrowed unit-hours"),
    ("idle_guaranteed_gpu_hours", "idle guaranteed unit-hours"),
)


def suggestion_justification(suggestion: Suggestion) -> str:
    s = suggestion
    figures = "; ".join(
        f"{label} {s.figures[key]}"
        for key, label in FIGURES_IN_JUSTIFICATION
        if s.figures.get(key) is not None
    )
    lines = [
        f"From the portal's suggestion for {s.team_namespace.name} {s.resource.name} from the "
        f"usage of {s.month:%Y-%m} (confidence {s.confidence}): guarantee "
        f"{format_amount(s.current_guarantee)} → {format_amount(s.suggested_guarantee)}, cap "
        f"{format_amount(s.current_cap)} → "
        f"{format_amount(s.suggested_cap)}.",
    ]
    if figures:
        lines.append(f"Figures: {figures}.")
    lines += [f"- {note}" for note in s.notes]
    return "\n".join(lines)


def request_from_suggestion(
    *, suggestion: Suggestion, acting_user: User, submit: bool
) -> QuotaRequest:
    """A request of the suggestion's team for the suggested guarantee and cap (leads of the
    team and platform admins; request_create refuses anybody else). The allocation's per-pod
    max is kept (lowered to the new cap if above it) and so are its priority classes. With
    ``submit`` it is submitted at once, and a refused submission leaves nothing behind, as for
    any request. One open request per suggestion: a second is refused naming the first."""
    current = Allocation.objects.filter(
        team_namespace=suggestion.team_namespace, resource=suggestion.resource
    ).first()
    per_pod_max = None
    if current is not None and current.per_pod_max is not None:
        per_pod_max = min(current.per_pod_max, suggestion.suggested_cap) or None
    return request_create(
        team=suggestion.team_namespace.team,
        acting_user=acting_user,
        justification=suggestion_justification(suggestion),
        lines=[
            LineInput(
                team_namespace_id=suggestion.team_namespace_id,
                resource_id=suggestion.resource_id,
                guarantee=suggestion.suggested_guarantee,
                cap=suggestion.suggested_cap,
                per_pod_max=per_pod_max,
                priority_classes=tuple(current.priority_classes) if current else (),
            )
        ],
        submit=submit,
        suggestion=suggestion,
    )
