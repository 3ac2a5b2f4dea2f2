"""A request's lines: read in order, written as JSON (audit events and notifications), and the
checks of their values that the lifecycle and the temporary grants share."""

from collections.abc import Iterable
from decimal import Decimal

from approvals.models import QuotaRequest, RequestLine
from approvals.validation import findings_json
from common.amounts import format_amount
from common.errors import ValidationFailed
from quotas.models import Allocation, PriorityClass


def ordered_lines(request: QuotaRequest) -> list[RequestLine]:
    return list(request.lines.select_related("team_namespace__cluster", "resource").order_by("id"))


def lines_json(request: QuotaRequest) -> list[dict]:
    amount = format_amount
    return [
        {
            "namespace": line.team_namespace.name,
            "cluster": line.team_namespace.cluster.name,
            "resource": line.resource.name,
            "current": {
                "guarantee": amount(line.current_guarantee),
                "cap": amount(line.current_cap),
                "per_pod_max": amount(line.current_per_pod_max),
                "priority_classes": list(line.current_priority_classes),
            },
            "requested": {
                "guarantee": amount(line.requested_guarantee),
                "cap": amount(line.requested_cap),
                "per_pod_max": amount(line.requested_per_pod_max),
                "priority_classes": list(line.requested_priority_classes),
            },
            "decided": None
            if line.decided_cap is None
            else {
                "guarantee": amount(line.decided_guarantee),
                "cap": amount(line.decided_cap),
                "per_pod_max": amount(line.decided_per_pod_max),
                "priority_classes": line.final_priority_classes,
            },
        }
        for line in ordered_lines(request)
    ]


def refresh_current(request: QuotaRequest) -> None:
    """The allocation as it is when the request is submitted (kept side by side)."""
    for line in ordered_lines(request):
        current = Allocation.objects.filter(
            team_namespace=line.team_namespace, resource=line.resource
        ).first()
        line.current_guarantee = current.guarantee if current else Decimal(0)
        line.current_cap = current.cap if current else Decimal(0)
        line.current_per_pod_max = current.per_pod_max if current else None
        line.current_priority_classes = list(current.priority_classes) if current else []
        line.current_version = current.version if current else None
        line.save()


def priority_classes_check(
    names: Iterable[str], *, where: str, allowed_now: Iterable[str] = ()
) -> list[str]:
    """Known class names, sorted and once each; an unknown name is refused, naming the field.
    Names the allocation allows already pass, so a stale one never blocks other changes."""
    names = sorted(set(names))
    known = set(PriorityClass.objects.filter(name__in=names).values_list("name", flat=True))
    known |= set(allowed_now)
    unknown = [n for n in names if n not in known]
    if unknown:
        every = ", ".join(PriorityClass.objects.order_by("-value").values_list("name", flat=True))
        raise ValidationFailed(
            f"{where}.priority_classes: unknown priority class "
            f"{', '.join(repr(n) for n in unknown)} (known: {every or 'none'})",
            field=f"{where}.priority_classes",
        )
    return names


def refuse_removed_classes(lines: list[RequestLine]) -> None:
    """A priority class removed since the request was written is not given to anyone; called
    with the clusters locked, which a removal takes before it checks (priority_class_delete)."""
    for index, line in enumerate(lines):
        priority_classes_check(
            line.final_priority_classes,
            where=f"lines[{index}]",
            allowed_now=line.current_priority_classes,
        )


def raise_on_errors(findings) -> None:
    errors = [f for f in findings if f.is_error]
    if errors:
        raise ValidationFailed(
            errors[0].message,
            field=errors[0].field,
            extra={
                "errors": findings_json(errors),
                "warnings": findings_json([f for f in findings if not f.is_error]),
            },
        )


def shown(value) -> str:
    if isinstance(value, list):
        return ", ".join(value) or "any"
    return "none" if value is None else str(value)
