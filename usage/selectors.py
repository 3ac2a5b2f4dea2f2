"""Reads of rolled-up usage for the rules, the suggestions and the pages."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db.models import Count, F
from django.db.models.functions import TruncDate

from quotas.models import Cluster
from quotas.rules import UsageFacts
from usage.forecast import DemandDay
from usage.models import UsageDaily, UsageSample
from usage.rollup import SOURCE_PRIORITY
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


def usage_daily_for(
    *,
    cluster: Cluster | str,
    start: date,
    end: date,
    namespace_ids: Iterable[int] | None = None,
) -> list[UsageDay]:
    """Daily rollups of every team namespace of the cluster (or of ``namespace_ids``),
    ``start`` to ``end`` inclusive, ordered by namespace, resource and day. Days without
    samples have no row."""
    if isinstance(cluster, str):
        cluster_q = {"team_namespace__cluster__name": cluster}
    else:
        cluster_q = {"team_namespace__cluster": cluster}
    if namespace_ids is not None:
        cluster_q["team_namespace_id__in"] = list(namespace_ids)
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


def typical_daily_peaks(
    *, cluster: Cluster, today: date, namespace_ids: Iterable[int] | None = None
) -> list[UsageFacts]:
    """Per namespace (of the cluster, or of ``namespace_ids``) and resource: the p95 of the
    daily peaks over the 30 days before ``today``, as the rules' usage facts. Namespaces
    without rollups are left out."""
    days = usage_daily_for(
        cluster=cluster,
        start=today - timedelta(days=PEAK_WINDOW_DAYS),
        end=today - timedelta(1),
        namespace_ids=namespace_ids,
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


def demand_history_for(
    *, cluster: Cluster | int, start: date, end: date, pairs: set[tuple[int, int]] | None = None
) -> dict[tuple[int, int], list[DemandDay]]:
    """The 5-minute demand (allocated + pending) of every namespace and resource of the cluster
    (or only ``pairs``), ``start`` to ``end`` inclusive, as one DemandDay a day: how many samples
    saw each demand, as the daily rollups keep it (``UsageDaily.demand_counts``): one row a
    namespace, resource and day, so a month of 1,000 namespaces is 30,000 small rows, not 8.6 M
    samples. Days without a rollup are not seen (the rollups run every few minutes and after
    every import).

    A day's samples come from one source, the one with most samples that day (ties: cluster,
    then Prometheus, then CSV), as the rollups choose it. Each day of data weighs one day (its
    samples share 24 hours), so a day sampled every minute counts no more than one sampled
    every five, whatever the sources' rates. Rollups computed before the counts were kept are
    read from those days' samples, in one grouped query."""
    cluster_id = cluster if isinstance(cluster, int) else cluster.pk
    days = UsageDaily.objects.filter(
        team_namespace__cluster_id=cluster_id, day__gte=start, day__lte=end
    )
    if pairs is not None:
        days = days.filter(
            team_namespace_id__in={ns for ns, _ in pairs},
            resource_id__in={res for _, res in pairs},
        )
    history: dict[tuple[int, int], list[DemandDay]] = defaultdict(list)
    missing: set[tuple[int, int, date]] = set()
    for ns_id, res_id, day, counts in days.values_list(
        "team_namespace_id", "resource_id", "day", "demand_counts"
    ).order_by("team_namespace_id", "resource_id", "day"):
        if pairs is not None and (ns_id, res_id) not in pairs:
            continue
        if counts is None:
            missing.add((ns_id, res_id, day))
            continue
        history[(ns_id, res_id)].append(
            _demand_day(day, {float(demand): n for demand, n in counts.items()})
        )
    if missing:
        for (ns_id, res_id, day), counts in _demand_from_samples(cluster_id, missing).items():
            history[(ns_id, res_id)].append(_demand_day(day, counts))
        for found in history.values():
            found.sort(key=lambda d: d.day)
    return dict(history)


def _demand_day(day: date, counts: dict[float, int]) -> DemandDay:
    return DemandDay(
        day=day, sample_hours=24 / sum(counts.values()), counts=tuple(sorted(counts.items()))
    )


def _demand_from_samples(
    cluster_id: int, wanted: set[tuple[int, int, date]]
) -> dict[tuple[int, int, date], dict[float, int]]:
    """{demand: samples} of the ``wanted`` (namespace id, resource id, day)s, from the samples
    of the source the rollups chose: one grouped query over the days' range."""
    tz = ZoneInfo(settings.TIME_ZONE)
    first = min(day for _, _, day in wanted)
    last = max(day for _, _, day in wanted)
    samples = UsageSample.objects.filter(
        team_namespace__cluster_id=cluster_id,
        team_namespace_id__in={ns for ns, _, _ in wanted},
        resource_id__in={res for _, res, _ in wanted},
        timestamp__gte=datetime.combine(first, time.min, tzinfo=tz),
        timestamp__lt=datetime.combine(last + timedelta(days=1), time.min, tzinfo=tz),
    )
    rows = (
        samples.annotate(
            day=TruncDate("timestamp", tzinfo=tz), demand=F("allocated") + F("pending")
        )
        .values_list("team_namespace_id", "resource_id", "day", "source", "demand")
        .annotate(n=Count("*"))
        .order_by()
    )
    # (pair, day) -> source -> {demand: samples}
    groups: dict[tuple[int, int, date], dict[str, dict[float, int]]] = defaultdict(dict)
    for ns_id, res_id, day, source, demand, n in rows:
        if (ns_id, res_id, day) not in wanted:
            continue
        counts = groups[(ns_id, res_id, day)].setdefault(source, {})
        counts[float(demand)] = counts.get(float(demand), 0) + n
    return {
        key: sources[
            min(sources, key=lambda s: (-sum(sources[s].values()), SOURCE_PRIORITY.get(s, 9)))
        ]
        for key, sources in groups.items()
    }
