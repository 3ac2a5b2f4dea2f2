"""Computing and storing the monthly suggestions of a cluster (the service behind the monthly
beat entry, ``suggest_quotas`` and the pages); the maths is in ``usage/suggest.py``."""

from __future__ import annotations

import calendar
from collections.abc import Iterable
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from quotas.models import Allocation, Cluster, Resource, TeamNamespace
from quotas.texts import stored_json
from usage.forecast import Prices
from usage.in_force import values_in_force
from usage.models import Suggestion
from usage.selectors import demand_history_for, usage_daily_for
from usage.suggest import AllocationUsage, Period, suggest_cluster

ZERO = Decimal(0)


def month_end(month: date) -> date:
    return month.replace(day=calendar.monthrange(month.year, month.month)[1])


def previous_month(today: date) -> date:
    return (today.replace(day=1) - timedelta(days=1)).replace(day=1)


def suggestion_items(
    *,
    cluster: Cluster,
    start: date,
    last: date,
    at: datetime | None = None,
    more: Iterable[tuple[int, int]] = (),
) -> list[tuple[tuple[int, int], AllocationUsage]]:
    """What the suggestions of ``cluster`` start from: one AllocationUsage per namespace and
    resource with an allocation, or with usage from ``start`` to ``last`` (or among ``more``,
    (namespace id, resource id) pairs), with those days' rollups and 5-minute demand; by
    namespace and resource name, each with its pair. The current values are the allocation as
    it is, or with ``at`` the values in force then (the backtest suggests as the job would have
    then)."""
    days = usage_daily_for(cluster=cluster, start=start, end=last)
    demand = demand_history_for(cluster=cluster, start=start, end=last) if last >= start else {}
    allocations = {
        (a.team_namespace_id, a.resource_id): a
        for a in Allocation.objects.filter(team_namespace__cluster=cluster)
    }
    by_pair: dict[tuple[int, int], list] = {pair: [] for pair in allocations}
    for d in days:
        by_pair.setdefault((d.team_namespace_id, d.resource_id), []).append(d)
    for pair in (*demand, *more):
        by_pair.setdefault(pair, [])
    namespaces = TeamNamespace.objects.in_bulk({ns for ns, _ in by_pair})
    resources = Resource.objects.in_bulk({r for _, r in by_pair})
    pairs = sorted(by_pair, key=lambda p: (namespaces[p[0]].name, resources[p[1]].name))
    values_at = values_in_force(pairs) if at is not None else None
    found = []
    for pair in pairs:
        if values_at is not None:
            guarantee, cap = values_at(*pair, at)
        elif (current := allocations.get(pair)) is not None:
            guarantee, cap = current.guarantee, current.cap
        else:
            guarantee, cap = ZERO, ZERO
        namespace, resource = namespaces[pair[0]], resources[pair[1]]
        item = AllocationUsage(
            namespace=namespace.name,
            resource=resource.name,
            workload_class=namespace.workload_class,
            resource_kind=resource.kind,
            current_guarantee=guarantee,
            current_cap=cap,
            days=by_pair[pair],
            unit=resource.unit,
            demand=demand.get(pair, ()),
        )
        found.append((pair, item))
    return found


def suggestions_compute(*, cluster: Cluster, month: date, today: date | None = None) -> int:
    """Suggest guarantee and cap for every allocation of ``cluster`` that has an allocation or
    usage in ``month`` (any day of it); replaces that month's earlier suggestions of the cluster.
    Returns how many were stored. Safe to run twice or at the same time: one upsert."""
    start = month.replace(day=1)
    end = month_end(start)
    today = today or timezone.localdate()
    period = Period(start=start, end=end, today=today)
    # Today's rollup is still growing: a month in progress is read up to yesterday.
    last = min(end, today - timedelta(days=1))
    found = suggestion_items(cluster=cluster, start=start, last=last)
    pairs = [pair for pair, _ in found]
    capacities = dict(cluster.capacities.values_list("resource__name", "capacity"))
    proposals = suggest_cluster(
        [item for _, item in found],
        period=period,
        capacities=capacities,
        max_cap_share=cluster.effective_max_cap_share,
        cluster=cluster.name,
        prices=Prices.of_cluster(cluster),
    )
    now = timezone.now()
    rows = [
        Suggestion(
            cluster=cluster,
            team_namespace_id=ns_id,
            resource_id=res_id,
            month=start,
            current_guarantee=p.current_guarantee,
            current_cap=p.current_cap,
            suggested_guarantee=p.guarantee,
            suggested_cap=p.cap,
            confidence=p.confidence,
            figures=stored_json(p.figures),
            notes=stored_json(p.notes),
            flags=list(p.flags),
            computed_at=now,
        )
        for (ns_id, res_id), p in zip(pairs, proposals, strict=True)
    ]
    with transaction.atomic():
        Suggestion.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["team_namespace", "resource", "month"],
            update_fields=[
                "cluster",
                "current_guarantee",
                "current_cap",
                "suggested_guarantee",
                "suggested_cap",
                "confidence",
                "figures",
                "notes",
                "flags",
                "computed_at",
            ],
        )
        # An allocation removed since the last run has no suggestion any more.
        Suggestion.objects.filter(cluster=cluster, month=start, computed_at__lt=now).delete()
    return len(rows)
