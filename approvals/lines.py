"""A request's lines: what a request or a decision asks for (LineInput, Decision), the lines
built from it and the values decided, read in order, written as JSON (audit events and
notifications), and the checks of their values that the lifecycle and the grants share."""

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum

from django.utils.translation import gettext as _

from approvals.models import QuotaRequest, RequestLine
from approvals.validation import findings_json
from common.amounts import format_amount
from common.errors import ValidationFailed
from quotas.models import Allocation, PriorityClass, Resource, TeamNamespace
from quotas.services import allocation_values_check


class Keep(Enum):
    """A field left out: keep the value it has (the allocation's, or what was requested).
    Removing a per-pod max or the class restriction is explicit: None, or no classes."""

    KEEP = "keep"


KEEP = Keep.KEEP


@dataclass(frozen=True)
class LineInput:
    team_namespace_id: int
    resource_id: int
    guarantee: object
    cap: object
    per_pod_max: object | Keep | None = KEEP
    priority_classes: tuple[str, ...] | Keep = KEEP


@dataclass(frozen=True)
class Decision:
    """An admin's modified amount for one line (approving less, or more, than asked).
    Per-pod max and classes left out (KEEP, or None for classes) stay as requested."""

    line_id: int
    guarantee: object
    cap: object
    per_pod_max: object | Keep | None = KEEP
    priority_classes: tuple[str, ...] | Keep | None = None


def build_lines(request: QuotaRequest, lines: Iterable[LineInput]) -> None:
    lines = list(lines)
    if not lines:
        raise ValidationFailed(_("a request needs at least one line"), field="lines")
    seen = set()
    for index, item in enumerate(lines):
        where = f"lines[{index}]"
        ns = (
            TeamNamespace.objects.select_related("cluster")
            .filter(pk=item.team_namespace_id)
            .first()
        )
        if ns is None or ns.team_id != request.team_id:
            raise ValidationFailed(
                _("%(field)s: namespace %(namespace)s does not belong to team %(team)s")
                % {
                    "field": f"{where}.team_namespace",
                    "namespace": item.team_namespace_id,
                    "team": request.team.slug,
                },
                field=f"{where}.team_namespace",
            )
        resource = Resource.objects.filter(pk=item.resource_id).first()
        if resource is None:
            raise ValidationFailed(
                _("%(field)s: unknown resource %(resource)s")
                % {"field": f"{where}.resource", "resource": item.resource_id},
                field=f"{where}.resource",
            )
        if (ns.pk, resource.pk) in seen:
            raise ValidationFailed(
                _("%(field)s: %(namespace)s %(resource)s appears twice")
                % {"field": where, "namespace": ns.name, "resource": resource.name},
                field=f"{where}.resource",
            )
        seen.add((ns.pk, resource.pk))
        current = Allocation.objects.filter(team_namespace=ns, resource=resource).first()
        # Left out means unchanged: only an explicit None / no classes removes them.
        per_pod_max = item.per_pod_max
        if per_pod_max is KEEP:
            per_pod_max = current.per_pod_max if current else None
        classes = item.priority_classes
        if classes is KEEP:
            classes = current.priority_classes if current else []
        classes = priority_classes_check(
            classes, where=where, allowed_now=current.priority_classes if current else ()
        )
        try:
            guarantee, cap, per_pod = allocation_values_check(
                guarantee=item.guarantee,
                cap=item.cap,
                per_pod_max=per_pod_max,
                where=f"{ns.name} {resource.name}",
                resource=resource,
            )
        except ValidationFailed as exc:
            raise ValidationFailed(
                f"{where}.{exc.field}: {exc.message}", field=f"{where}.{exc.field}"
            ) from None
        RequestLine.objects.create(
            request=request,
            team_namespace=ns,
            resource=resource,
            current_guarantee=current.guarantee if current else Decimal(0),
            current_cap=current.cap if current else Decimal(0),
            current_per_pod_max=current.per_pod_max if current else None,
            current_priority_classes=list(current.priority_classes) if current else [],
            current_version=current.version if current else None,
            base_version=current.version if current else None,
            requested_guarantee=guarantee,
            requested_cap=cap,
            requested_per_pod_max=per_pod,
            requested_priority_classes=classes,
        )


def _final_values(line: RequestLine) -> tuple:
    return (
        line.final_guarantee,
        line.final_cap,
        line.final_per_pod_max,
        sorted(line.final_priority_classes),
    )


def record_decisions(request: QuotaRequest, decisions: Iterable[Decision]) -> bool:
    """Record the decided values; True when they change what would be applied."""
    by_id = {line.pk: line for line in ordered_lines(request)}
    changed = False
    for index, decision in enumerate(decisions):
        where = f"decisions[{index}]"
        line = by_id.get(decision.line_id)
        if line is None:
            raise ValidationFailed(
                _("%(field)s: line %(line)s is not part of request #%(id)s")
                % {"field": f"{where}.line_id", "line": decision.line_id, "id": request.pk},
                field=f"{where}.line_id",
            )
        before = _final_values(line)
        per_pod_max = decision.per_pod_max
        if per_pod_max is KEEP:
            per_pod_max = line.final_per_pod_max
        classes = decision.priority_classes
        if classes is None or classes is KEEP:
            classes = line.final_priority_classes
        classes = priority_classes_check(
            classes, where=where, allowed_now=line.current_priority_classes
        )
        try:
            g, c, p = allocation_values_check(
                guarantee=decision.guarantee,
                cap=decision.cap,
                per_pod_max=per_pod_max,
                where=f"{line.team_namespace.name} {line.resource.name}",
                resource=line.resource,
            )
        except ValidationFailed as exc:
            raise ValidationFailed(
                f"{where}.{exc.field}: {exc.message}", field=f"{where}.{exc.field}"
            ) from None
        line.decided_guarantee, line.decided_cap, line.decided_per_pod_max = g, c, p
        line.decided_priority_classes = classes
        line.save()
        changed = changed or _final_values(line) != before
    return changed


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
            _("%(field)s: unknown priority class %(unknown)s (known: %(known)s)")
            % {
                "field": f"{where}.priority_classes",
                "unknown": ", ".join(repr(n) for n in unknown),
                "known": every or _("none"),
            },
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
        return ", ".join(value) or _("any")
    return _("none") if value is None else str(value)
