"""Writes of quota data: every allocation change makes a new kept version."""

from collections.abc import Iterable
from decimal import Decimal, InvalidOperation

from django.contrib.auth.models import User
from django.db import transaction

from portal.errors import ValidationFailed
from quotas.models import Allocation, AllocationVersion, Resource, TeamNamespace


def _amount(value: object, field: str) -> Decimal:
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, ValueError) as exc:
        raise ValidationFailed(f"{field} must be a number, got {value!r}", field=field) from exc
    if not amount.is_finite():
        raise ValidationFailed(f"{field} must be a finite number, got {value!r}", field=field)
    if amount < 0:
        raise ValidationFailed(f"{field} must not be negative, got {amount:f}", field=field)
    return amount


def allocation_values_check(
    *, guarantee: object, cap: object, per_pod_max: object | None
) -> tuple[Decimal, Decimal, Decimal | None]:
    """The rules of a single allocation; the whole-plan rules live with requests."""
    g = _amount(guarantee, "guarantee")
    c = _amount(cap, "cap")
    p = None if per_pod_max in (None, "") else _amount(per_pod_max, "per_pod_max")
    if g > c:
        raise ValidationFailed(
            f"guarantee {g.normalize():f} exceeds cap {c.normalize():f} (guarantee ≤ cap)",
            field="guarantee",
        )
    if p is not None and p == 0:
        raise ValidationFailed("per_pod_max must be positive or empty", field="per_pod_max")
    if p is not None and p > c:
        raise ValidationFailed(
            f"per_pod_max {p.normalize():f} exceeds cap {c.normalize():f} (per-pod max ≤ cap)",
            field="per_pod_max",
        )
    return g, c, p


def allocation_set(
    *,
    team_namespace: TeamNamespace,
    resource: Resource,
    guarantee: object,
    cap: object,
    per_pod_max: object | None = None,
    priority_classes: Iterable[str] = (),
    acting_user: User | None,
    reason: str = "",
    source: str = "",
) -> Allocation:
    """Set an allocation, keeping the previous state as a version; no-op if nothing changes.

    Runs inside the caller's transaction when there is one (approvals set several allocations
    and their audit events atomically).
    """
    g, c, p = allocation_values_check(guarantee=guarantee, cap=cap, per_pod_max=per_pod_max)
    classes = sorted(set(priority_classes))
    with transaction.atomic():
        allocation = (
            Allocation.objects.select_for_update()
            .filter(team_namespace=team_namespace, resource=resource)
            .first()
        )
        if allocation is None:
            allocation = Allocation.objects.create(
                team_namespace=team_namespace,
                resource=resource,
                guarantee=g,
                cap=c,
                per_pod_max=p,
                priority_classes=classes,
                version=1,
                updated_by=acting_user,
            )
        else:
            unchanged = (
                allocation.guarantee == g
                and allocation.cap == c
                and allocation.per_pod_max == p
                and sorted(allocation.priority_classes) == classes
            )
            if unchanged:
                return allocation
            allocation.guarantee, allocation.cap, allocation.per_pod_max = g, c, p
            allocation.priority_classes = classes
            allocation.version += 1
            allocation.updated_by = acting_user
            allocation.save()
        AllocationVersion.objects.create(
            allocation=allocation,
            version=allocation.version,
            guarantee=g,
            cap=c,
            per_pod_max=p,
            priority_classes=classes,
            changed_by=acting_user,
            reason=reason,
            source=source,
        )
    return allocation
