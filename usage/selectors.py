"""Reads of rolled-up usage for the rules, the suggestions and the pages."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db.models import Count, F, Max, Min
from django.db.models.functions import TruncDate

from quotas.models import Cluster
from quotas.rules import UsageFacts
from usage.forecast import DemandDay
from usage.models import UsageDaily, UsageSample
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


SOURCE_PRIORITY = {"cluster": 0, "prometheus": 1, "csv": 2}  # as the rollup's ties


def demand_history_for(
    *, cluster: Cluster | int, start: date, end: date, pairs: set[tuple[int, int]] | None = None
) -> dict[tuple[int, int], list[DemandDay]]:
    """The 5-minute demand (allocated + pending) of every namespace and resource of the cluster
    (or only ``pairs``), ``start`` to ``end`` inclusive, as one DemandDay a day: how many samples
    saw each demand. One grouped query: the database counts, Python never sees a sample.

    A day's samples come from one source, the one with most samples that day (ties: cluster,
    then Prometheus, then CSV), as the daily rollups choose it; each sample stands for the day's
    mean interval between samples of that source (at most ``USAGE_SAMPLE_MAX_GAP_SECONDS``; a
    day with one sample: that maximum)."""
    tz = ZoneInfo(settings.TIME_ZONE)
    lo = datetime.combine(start, time.min, tzinfo=tz)
    hi = datetime.combine(end + timedelta(days=1), time.min, tzinfo=tz)
    cluster_id = cluster if isinstance(cluster, int) else cluster.pk
    samples = UsageSample.objects.filter(
        team_namespace__cluster_id=cluster_id, timestamp__gte=lo, timestamp__lt=hi
    )
    if pairs is not None:
        samples = samples.filter(
            team_namespace_id__in={ns for ns, _ in pairs},
            resource_id__in={res for _, res in pairs},
        )
    rows = (
        samples.annotate(
            day=TruncDate("timestamp", tzinfo=tz), demand=F("allocated") + F("pending")
        )
        .values_list("team_namespace_id", "resource_id", "day", "source", "demand")
        .annotate(n=Count("*"), first=Min("timestamp"), last=Max("timestamp"))
        .order_by()
    )
    # (pair, day) -> source -> [samples, first, last, {demand: samples}]
    groups: dict[tuple[int, int, date], dict[str, list]] = defaultdict(dict)
    for ns_id, res_id, day, source, demand, n, first, last in rows.iterator(chunk_size=10_000):
        if pairs is not None and (ns_id, res_id) not in pairs:
            continue
        group = groups[(ns_id, res_id, day)].get(source)
        if group is None:
            groups[(ns_id, res_id, day)][source] = [n, first, last, {float(demand): n}]
        else:
            group[0] += n
            group[1] = min(group[1], first)
            group[2] = max(group[2], last)
            group[3][float(demand)] = group[3].get(float(demand), 0) + n
    max_gap = float(settings.USAGE_SAMPLE_MAX_GAP_SECONDS)
    history: dict[tuple[int, int], list[DemandDay]] = defaultdict(list)
    for (ns_id, res_id, day), sources in sorted(groups.items()):
        source = min(sources, key=lambda s: (-sources[s][0], SOURCE_PRIORITY.get(s, 9)))
        n, first, last, counts = sources[source]
        interval = (last - first).total_seconds() / (n - 1) if n > 1 else max_gap
        history[(ns_id, res_id)].append(
            DemandDay(
                day=day,
                sample_hours=min(interval, max_gap) / 3600,
                counts=tuple(sorted(counts.items())),
            )
        )
    return dict(history)
