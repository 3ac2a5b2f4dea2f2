"""Reads of rolled-up usage for the rules, the suggestions and the pages."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

from quotas.models import Cluster
from quotas.rules import UsageFacts
from usage.models import UsageDaily
from usage.stats import percentile


@dataclass(frozen=True)
class UsageDay:
    """One day of one team namespace and resource (see UsageDaily for what each figure means)."""

    cluster: str
    team: str
    namespace: str
    workload_class: str
    resource: str
    day: date
    source: str
    samples: int
    peak: Decimal
    p95: Decimal
    mean: Decimal
    utilization_mean: Decimal | None
    memory_used_mean_mib: Decimal | None
    gpu_hours: Decimal
    borrowed_gpu_hours: Decimal
    idle_guaranteed_gpu_hours: Decimal
    guarantee: Decimal
    pending_wait_seconds: int | None
    pending_wait_mean_seconds: int | None
    pending_peak: Decimal
    evictions: int
    team_namespace_id: int
    resource_id: int


def usage_daily_for(*, cluster: Cluster | str, start: date, end: date) -> list[UsageDay]:
    """Daily rollups of every team namespace of the cluster, ``start`` to ``end`` inclusive,
    ordered by namespace, resource and day. Days without samples have no row."""
    if isinstance(cluster, str):
        cluster_q = {"team_namespace__cluster__name": cluster}
    else:
        cluster_q = {"team_namespace__cluster": cluster}
    # Plain values, not model instances: a month of a thousand namespaces is 30,000 rows, and
    # building model objects (and related ones) was most of the time suggestions took.
    rows = (
        UsageDaily.objects.filter(day__gte=start, day__lte=end, **cluster_q)
        .order_by("team_namespace__name", "resource__name", "day")
        .values_list(
            "team_namespace__cluster__name",
            "team_namespace__team__slug",
            "team_namespace__name",
            "team_namespace__workload_class",
            "resource__name",
            *_DAY_FIELDS,
            "team_namespace_id",
            "resource_id",
        )
    )
    return [UsageDay(*row) for row in rows]


# The UsageDay fields read straight from a UsageDaily row, in the dataclass's order.
_DAY_FIELDS = (
    "day",
    "source",
    "samples",
    "peak",
    "p95",
    "mean",
    "utilization_mean",
    "memory_used_mean_mib",
    "gpu_hours",
    "borrowed_gpu_hours",
    "idle_guaranteed_gpu_hours",
    "guarantee",
    "pending_wait_seconds",
    "pending_wait_mean_seconds",
    "pending_peak",
    "evictions",
)


# How far back "last month's typical daily peak" looks, and which percentile of the daily peaks
# counts as typical (one bad day out of twenty does not make the typical peak).
PEAK_WINDOW_DAYS = 30
TYPICAL_PEAK_PERCENTILE = Decimal("0.95")


def typical_daily_peaks(*, cluster: Cluster, today: date) -> list[UsageFacts]:
    """Per namespace and resource of the cluster: the p95 of the daily peaks over the 30 days
    before ``today``, as the rules' usage facts. Namespaces without rollups are left out."""
    days = usage_daily_for(
        cluster=cluster, start=today - timedelta(days=PEAK_WINDOW_DAYS), end=today - timedelta(1)
    )
    peaks: dict[tuple[str, str], list[Decimal]] = defaultdict(list)
    for d in days:
        peaks[(d.namespace, d.resource)].append(d.peak)
    return [
        UsageFacts(
            cluster=cluster.name,
            namespace=namespace,
            resource=resource,
            typical_daily_peak=percentile(values, TYPICAL_PEAK_PERCENTILE),
        )
        for (namespace, resource), values in sorted(peaks.items())
    ]
