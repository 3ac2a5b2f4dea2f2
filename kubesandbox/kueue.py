"""Kueue's validating webhooks of ClusterQueues and Cohorts (``vclusterqueue.kb.io``,
``vcohort.kb.io``), the part that judges quotas, as the sandbox applies them.

What kubernetes-sigs/kueue ``pkg/webhooks/clusterqueue_webhook.go`` and ``cohort_webhook.go``
check on CREATE and UPDATE beyond the CRDs' own rules: covered resources and flavor names unique
across the resource groups, each flavor's resources named as the covered ones, quotas not
negative, no ``borrowingLimit`` or ``lendingLimit`` without a cohort (a ClusterQueue) or a parent
(a Cohort), and a ClusterQueue's ``lendingLimit`` at most its ``nominalQuota`` (Kueue does not
hold a Cohort to that). A denial is coded and worded as kube-apiserver relays this webhook's:
403, ``admission webhook "vclusterqueue.kb.io" denied the request: ...``.
"""

from __future__ import annotations

from typing import Any

from kubesandbox.errors import ApiError
from kubesandbox.quantity import quantity_or_none
from kubesandbox.schemas import bad_value

GROUP = "kueue.x-k8s.io"
WEBHOOKS = {"clusterqueues": "vclusterqueue.kb.io", "cohorts": "vcohort.kb.io"}
IS_NEGATIVE = "must be greater than or equal to 0"


def admit(plural: str, obj: dict[str, Any]) -> None:
    """Raise the webhook's denial of ``obj`` (a ClusterQueue or Cohort of either served
    version) as an :class:`ApiError`; return when it is admitted."""
    spec = obj.get("spec") or {}
    is_cohort = plural == "cohorts"
    if is_cohort:
        parent = spec.get("parentName") or spec.get("parent")
    else:
        parent = spec.get("cohortName") or spec.get("cohort")
    errors = _resource_group_errors(
        spec.get("resourceGroups") or [], has_parent=bool(parent), is_cohort=is_cohort
    )
    if errors:
        message = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        raise ApiError(
            403,
            "Forbidden",
            f'admission webhook "{WEBHOOKS[plural]}" denied the request: {message}',
        )


def _invalid(path: str, value: Any, detail: str) -> str:
    return f"{path}: Invalid value: {bad_value(str(value))}: {detail}"


def _resource_group_errors(
    groups: list[dict[str, Any]], *, has_parent: bool, is_cohort: bool
) -> list[str]:
    errors: list[str] = []
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for i, group in enumerate(groups):
        base = f"spec.resourceGroups[{i}]"
        covered = list(group.get("coveredResources") or [])
        for j, name in enumerate(covered):
            if name in seen_resources:
                errors.append(f"{base}.coveredResources[{j}]: Duplicate value: {bad_value(name)}")
            seen_resources.add(name)
        for j, flavor in enumerate(group.get("flavors") or []):
            path = f"{base}.flavors[{j}]"
            errors += _flavor_errors(flavor, covered, path, has_parent, is_cohort)
            name = flavor.get("name", "")
            if name in seen_flavors:
                errors.append(f"{path}.name: Duplicate value: {bad_value(name)}")
            seen_flavors.add(name)
    return errors


def _flavor_errors(
    flavor: dict[str, Any], covered: list[str], base: str, has_parent: bool, is_cohort: bool
) -> list[str]:
    errors: list[str] = []
    empty = f"must be nil when {'parent' if is_cohort else 'cohort'} is empty"
    for i, quota in enumerate((flavor.get("resources") or [])[: len(covered)]):
        path = f"{base}.resources[{i}]"
        if quota.get("name") != covered[i]:
            errors.append(
                _invalid(
                    f"{path}.name", quota.get("name"), "must match the name in coveredResources"
                )
            )
        nominal = quota.get("nominalQuota", "0")
        errors += _negative(f"{path}.nominalQuota", nominal)
        if "borrowingLimit" in quota:
            limit = quota["borrowingLimit"]
            if not has_parent:
                errors.append(_invalid(f"{path}.borrowingLimit", limit, empty))
            errors += _negative(f"{path}.borrowingLimit", limit)
        if "lendingLimit" in quota:
            limit = quota["lendingLimit"]
            errors += _negative(f"{path}.lendingLimit", limit)
            if not has_parent:
                errors.append(_invalid(f"{path}.lendingLimit", limit, empty))
            lend, most = quantity_or_none(limit), quantity_or_none(nominal)
            if not is_cohort and lend is not None and most is not None and lend > most:
                errors.append(
                    _invalid(
                        f"{path}.lendingLimit",
                        limit,
                        "must be less than or equal to the nominalQuota",
                    )
                )
    return errors


def _negative(path: str, value: Any) -> list[str]:
    number = quantity_or_none(value)
    return [_invalid(path, value, IS_NEGATIVE)] if number is not None and number < 0 else []
