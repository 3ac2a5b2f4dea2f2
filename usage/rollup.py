"""Daily rollups of the raw usage samples, and pruning of samples past the retention.

What each figure of a day (in ``TIME_ZONE``) of one team namespace and resource means:

- The allocation figures come from one source, the one with most samples that day (ties:
  cluster, then Prometheus, then CSV), so two sources of the same namespace never add up.
  ``samples``, ``peak`` (max), ``p95`` (continuous percentile, as ``percentile_cont``), ``mean``
  (of the samples), ``pending_peak``, ``pending_wait_seconds`` (the longest wait seen) and
  ``pending_wait_mean_seconds`` (mean of the samples' longest waits where something waited).
- Each sample stands for the time until the next sample of its source (the last one: since the
  previous), at most ``USAGE_SAMPLE_MAX_GAP_SECONDS``, whether or not that neighbour lies in
  the days rolled up, however far it lies (a range rolled up whole or in parts gives the same
  figures: the samples up to the longest gap around the days are read, and a source whose last
  one there has no neighbour is asked for one further away, which counts as the longest gap):
  ``gpu_hours`` = Σ allocated × time,
  ``borrowed_gpu_hours`` = Σ max(allocated - guarantee, 0) × time and
  ``idle_guaranteed_gpu_hours`` = Σ max(guarantee - allocated, 0) × time, in unit-hours.
- The guarantee in force at a sample is the allocation version current at that time; before the
  first version, the first version's (history imported from before the portal knew the
  allocation is measured against its first guarantee); without versions the allocation's own;
  without an allocation 0.
- ``demand_counts``: how many of the source's samples saw each demand (allocated + pending),
  the day's distribution the suggestions forecast from (``usage.selectors.demand_history_for``).
- ``utilization_mean`` and ``memory_used_mean_mib`` average every source that has them;
  ``evictions`` add up over every source (only the cluster collector counts them).

On PostgreSQL one ``INSERT ... SELECT ... ON CONFLICT`` computes a whole day range in the
database, in one pass over the samples: a window gives each sample its time (the rows come out
of it ordered by namespace, resource, source and day, so the grouping needs no second sort),
one join gives it the guarantee in force, one grouping per source and day gives every figure
(the demand counts too: each group keeps its samples' demands, counted for the picked source
only, instead of a second pass over the samples, which cost a tenth of the rollup),
and the figures across sources (utilization, memory, evictions) are sums of the per-source
groups. A range of several days is cut into parts of consecutive days computed side by side,
one connection each (``USAGE_ROLLUP_CONNECTIONS``), because PostgreSQL runs that window on one
core. Elsewhere (the SQLite demo) the same figures are computed in Python, one namespace
and resource at a time. ``tests/usage/test_rollup.py`` checks all three agree.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import ROUND_HALF_UP, Decimal
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import connection, connections, transaction
from django.utils import timezone

from usage.in_force import values_in_force
from usage.models import UsageDaily, UsageSample
from usage.partitions import drop_before, partitioned
from usage.stats import percentile, stood_for

log = logging.getLogger(__name__)

SOURCE_PRIORITY = {"cluster": 0, "prometheus": 1, "csv": 2}
P95 = Decimal("0.95")
HOUR = Decimal(3600)
PRUNE_BATCH = 20_000


@dataclass(frozen=True)
class RollupResult:
    days: int  # (namespace, resource, day) rows written
    start: date
    end: date


def _day_bounds(start: date, end: date) -> tuple[datetime, datetime]:
    tz = ZoneInfo(settings.TIME_ZONE)
    lo = datetime.combine(start, time.min, tzinfo=tz)
    hi = datetime.combine(end + timedelta(days=1), time.min, tzinfo=tz)
    return lo, hi


def usage_rollup(*, start: date, end: date, cluster_id: int | None = None) -> RollupResult:
    """(Re)compute the rollups of the days ``start`` to ``end`` inclusive from the samples there
    are; days without samples keep the rollup they have (their samples may be pruned)."""
    if end < start:
        raise ValueError(f"end {end} is before start {start}")
    if connection.vendor == "postgresql":
        written = _rollup_postgresql(start, end, cluster_id)
    else:
        written = _rollup_python(start, end, cluster_id)
    log.info("usage rollup %s..%s: %s rows", start, end, written)
    return RollupResult(days=written, start=start, end=end)


# --------------------------------------------------------------------------------------------
# PostgreSQL: one statement

_ROLLUP_SQL = """
WITH versions AS (
    SELECT a.team_namespace_id, a.resource_id, v.guarantee,
           CASE WHEN lag(v.changed_at) OVER vw IS NULL THEN '-infinity'::timestamptz
                ELSE v.changed_at END AS valid_from,
           coalesce(lead(v.changed_at) OVER vw, 'infinity'::timestamptz) AS valid_to
    FROM quotas_allocationversion v
    JOIN quotas_allocation a ON a.id = v.allocation_id
    WINDOW vw AS (PARTITION BY v.allocation_id ORDER BY v.version)
    UNION ALL
    SELECT a.team_namespace_id, a.resource_id, a.guarantee,
           '-infinity'::timestamptz, 'infinity'::timestamptz
    FROM quotas_allocation a
    WHERE NOT EXISTS (SELECT 1 FROM quotas_allocationversion v WHERE v.allocation_id = a.id)
),
raw AS (
    SELECT s.team_namespace_id, s.resource_id, s.source, s."timestamp", s.allocated,
           s.utilization, s.memory_used_mib, s.pending, s.wait_seconds, s.evictions,
           (s."timestamp" AT TIME ZONE %(tz)s)::date AS day,
           extract(epoch FROM least(coalesce(
               lead(s."timestamp") OVER w - s."timestamp",
               -- A neighbour past the samples read is further away than the longest gap.
               CASE WHEN usage_source_sampled(s.team_namespace_id, s.resource_id, s.source,
                                              %(hi_gap)s, 'infinity')
                    THEN make_interval(secs => %(max_gap)s) END,
               s."timestamp" - lag(s."timestamp") OVER w,
               CASE WHEN usage_source_sampled(s.team_namespace_id, s.resource_id, s.source,
                                              '-infinity', %(lo_gap)s)
                    THEN make_interval(secs => %(max_gap)s) END,
               interval '0'), make_interval(secs => %(max_gap)s))) AS seconds
    FROM quotas_usagesample s
    {cluster_join}
    WHERE s."timestamp" >= %(lo_gap)s AND s."timestamp" < %(hi_gap)s {cluster_where}
    WINDOW w AS (PARTITION BY s.team_namespace_id, s.resource_id, s.source
                 ORDER BY (s."timestamp" AT TIME ZONE %(tz)s)::date, s."timestamp")
),
samples AS (
    SELECT r.*, coalesce(v.guarantee, 0) AS g
    FROM raw r
    LEFT JOIN versions v ON v.team_namespace_id = r.team_namespace_id
        AND v.resource_id = r.resource_id
        AND r."timestamp" >= v.valid_from AND r."timestamp" < v.valid_to
    WHERE r."timestamp" >= %(lo)s AND r."timestamp" < %(hi)s
),
per_source AS (
    SELECT team_namespace_id, resource_id, source, day,
           count(*) AS samples,
           max(allocated) AS peak,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY allocated) AS p95,
           avg(allocated) AS mean,
           sum(allocated * seconds) / 3600 AS gpu_hours,
           sum(greatest(allocated - g, 0) * seconds) / 3600 AS borrowed,
           sum(greatest(g - allocated, 0) * seconds) / 3600 AS idle,
           max("timestamp") AS last_at,
           max(wait_seconds) AS wait_max,
           avg(wait_seconds) AS wait_mean,
           max(pending) AS pending_peak,
           sum(utilization) AS utilization_sum, count(utilization) AS utilization_n,
           sum(memory_used_mib) AS memory_sum, count(memory_used_mib) AS memory_n,
           sum(evictions) AS evictions,
           array_agg(allocated + pending) AS demands
    FROM samples
    GROUP BY team_namespace_id, resource_id, source, day
),
ranked AS (
    SELECT p.*,
           sum(utilization_sum) OVER d / nullif(sum(utilization_n) OVER d, 0) AS utilization_all,
           sum(memory_sum) OVER d / nullif(sum(memory_n) OVER d, 0) AS memory_all,
           sum(evictions) OVER d AS evictions_all,
           row_number() OVER (PARTITION BY team_namespace_id, resource_id, day
                              ORDER BY samples DESC,
                                       CASE source WHEN 'cluster' THEN 0
                                                   WHEN 'prometheus' THEN 1 ELSE 2 END) AS pick
    FROM per_source p
    WINDOW d AS (PARTITION BY team_namespace_id, resource_id, day)
)
INSERT INTO quotas_usagedaily (
    team_namespace_id, resource_id, day, source, samples, peak, p95, mean, utilization_mean,
    memory_used_mean_mib, gpu_hours, borrowed_gpu_hours, idle_guaranteed_gpu_hours, guarantee,
    pending_wait_seconds, pending_wait_mean_seconds, pending_peak, evictions, demand_counts,
    computed_at)
SELECT c.team_namespace_id, c.resource_id, c.day, c.source, c.samples, c.peak,
       round(c.p95::numeric, 3), round(c.mean, 3), round(c.utilization_all, 2),
       round(c.memory_all, 1), round(c.gpu_hours, 3), round(c.borrowed, 3), round(c.idle, 3),
       coalesce(v.guarantee, 0), c.wait_max, round(c.wait_mean), c.pending_peak,
       c.evictions_all,
       (SELECT jsonb_object_agg(demand::text, n)
        FROM (SELECT demand, count(*) AS n FROM unnest(c.demands) demand GROUP BY demand) counted),
       now()
FROM ranked c
LEFT JOIN versions v ON v.team_namespace_id = c.team_namespace_id
    AND v.resource_id = c.resource_id
    AND c.last_at >= v.valid_from AND c.last_at < v.valid_to
WHERE c.pick = 1
ON CONFLICT (team_namespace_id, resource_id, day) DO UPDATE SET
    source = EXCLUDED.source, samples = EXCLUDED.samples, peak = EXCLUDED.peak,
    p95 = EXCLUDED.p95, mean = EXCLUDED.mean, utilization_mean = EXCLUDED.utilization_mean,
    memory_used_mean_mib = EXCLUDED.memory_used_mean_mib, gpu_hours = EXCLUDED.gpu_hours,
    borrowed_gpu_hours = EXCLUDED.borrowed_gpu_hours,
    idle_guaranteed_gpu_hours = EXCLUDED.idle_guaranteed_gpu_hours,
    guarantee = EXCLUDED.guarantee, pending_wait_seconds = EXCLUDED.pending_wait_seconds,
    pending_wait_mean_seconds = EXCLUDED.pending_wait_mean_seconds,
    pending_peak = EXCLUDED.pending_peak, evictions = EXCLUDED.evictions,
    demand_counts = EXCLUDED.demand_counts, computed_at = EXCLUDED.computed_at
"""


def _rollup_postgresql(start: date, end: date, cluster_id: int | None) -> int:
    """The days in parts of consecutive days, each part its own statement on its own
    connection, ``USAGE_ROLLUP_CONNECTIONS`` at a time: PostgreSQL runs the statement's window
    on one core, so a long range (a backfill, an import's history) otherwise leaves the others
    idle. Each part commits alone (a rollup is idempotent: a part that failed is recomputed by
    the next run). Inside a transaction the caller holds, one statement on its connection, as
    the parts could not see what it has not committed."""
    parts = _parts(start, end, settings.USAGE_ROLLUP_CONNECTIONS)
    if len(parts) == 1 or connection.in_atomic_block:
        return _rollup_statement(start, end, cluster_id)
    with ThreadPoolExecutor(max_workers=len(parts), thread_name_prefix="usage-rollup") as pool:
        futures = [
            pool.submit(_on_own_connection, first, last, cluster_id) for first, last in parts
        ]
        return sum(future.result() for future in futures)


def _parts(start: date, end: date, count: int) -> list[tuple[date, date]]:
    """``start``..``end`` in at most ``count`` runs of consecutive days, as even as they go."""
    days = (end - start).days + 1
    count = max(1, min(count, days))
    size, extra = divmod(days, count)
    parts, first = [], start
    for i in range(count):
        last = first + timedelta(days=size + (1 if i < extra else 0) - 1)
        parts.append((first, last))
        first = last + timedelta(days=1)
    return parts


def _on_own_connection(start: date, end: date, cluster_id: int | None) -> int:
    try:
        return _rollup_statement(start, end, cluster_id)
    finally:
        connections.close_all()  # this thread's connection


def _rollup_statement(start: date, end: date, cluster_id: int | None) -> int:
    lo, hi = _day_bounds(start, end)
    gap = timedelta(seconds=settings.USAGE_SAMPLE_MAX_GAP_SECONDS)
    params = {
        "lo": lo,
        "hi": hi,
        # The samples a gap before and after: the first and last ones' neighbours.
        "lo_gap": lo - gap,
        "hi_gap": hi + gap,
        "max_gap": settings.USAGE_SAMPLE_MAX_GAP_SECONDS,
        "tz": settings.TIME_ZONE,
        "cluster_id": cluster_id,
    }
    if cluster_id is None:
        sql = _ROLLUP_SQL.format(cluster_join="", cluster_where="")
    else:
        sql = _ROLLUP_SQL.format(
            cluster_join="JOIN quotas_teamnamespace tn ON tn.id = s.team_namespace_id",
            cluster_where="AND tn.cluster_id = %(cluster_id)s",
        )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


# --------------------------------------------------------------------------------------------
# Python: the same figures, one namespace and resource at a time (SQLite demo)


def _q(value: Decimal, places: str) -> Decimal:
    return value.quantize(Decimal(places), rounding=ROUND_HALF_UP)


def _guarantee_lookup(pairs: set[tuple[int, int]]):
    """A function (namespace id, resource id, time) -> guarantee in force then."""
    values_at = values_in_force(pairs)
    return lambda ns_id, res_id, at: values_at(ns_id, res_id, at)[0]


def _rollup_python(start: date, end: date, cluster_id: int | None) -> int:
    lo, hi = _day_bounds(start, end)
    reach = timedelta(seconds=settings.USAGE_SAMPLE_MAX_GAP_SECONDS)  # the neighbours' reach
    tz = ZoneInfo(settings.TIME_ZONE)
    samples = UsageSample.objects.filter(timestamp__gte=lo - reach, timestamp__lt=hi + reach)
    if cluster_id is not None:
        samples = samples.filter(team_namespace__cluster_id=cluster_id)
    pairs = set(samples.values_list("team_namespace_id", "resource_id").distinct())
    guarantee_at = _guarantee_lookup(pairs)
    written = 0
    for ns_id, res_id in sorted(pairs):
        series: dict[str, list[UsageSample]] = defaultdict(list)
        for s in samples.filter(team_namespace_id=ns_id, resource_id=res_id).order_by(
            "source", "timestamp"
        ):
            series[s.source].append(s)
        # (day, source) -> [(sample, seconds, guarantee)]
        by_day: dict[tuple[date, str], list] = defaultdict(list)
        for source, rows in series.items():
            timed = _stood_for(ns_id, res_id, source, [s.timestamp for s in rows], lo, hi)
            for s, seconds in zip(rows, timed, strict=True):
                if not lo <= s.timestamp < hi:
                    continue
                day = s.timestamp.astimezone(tz).date()
                by_day[(day, source)].append((s, seconds, guarantee_at(ns_id, res_id, s.timestamp)))
        days = sorted({day for day, _ in by_day})
        for day in days:
            candidates = [(src, by_day[(day, src)]) for src in series if (day, src) in by_day]
            source, rows = min(candidates, key=lambda c: (-len(c[1]), SOURCE_PRIORITY[c[0]]))
            every = [row for _, rs in candidates for row in rs]
            _write_day(ns_id, res_id, day, source, rows, every)
            written += 1
    return written


def _stood_for(
    ns_id: int, res_id: int, source: str, times: list[datetime], lo: datetime, hi: datetime
) -> list[Decimal]:
    """stood_for() of one source's samples read from ``lo`` - and to ``hi`` + the longest gap,
    asking the table for samples past them only where the last sample of ``lo``..``hi`` has no
    neighbour among them."""
    max_gap = Decimal(settings.USAGE_SAMPLE_MAX_GAP_SECONDS)
    reach = timedelta(seconds=settings.USAGE_SAMPLE_MAX_GAP_SECONDS)
    same = UsageSample.objects.filter(team_namespace_id=ns_id, resource_id=res_id, source=source)
    counted = lo <= times[-1] < hi  # the last sample read is one of the days'
    more_after = counted and same.filter(timestamp__gte=hi + reach).exists()
    more_before = (
        counted
        and len(times) == 1
        and not more_after
        and same.filter(timestamp__lt=lo - reach).exists()
    )
    return stood_for(times, max_gap, more_before=more_before, more_after=more_after)


def _mean(values: list[Decimal]) -> Decimal | None:
    return sum(values, Decimal(0)) / len(values) if values else None


def demand_counts(demands: list[Decimal]) -> dict[str, int]:
    """How many samples saw each demand, keyed as the database writes an amount ("3.000")."""
    counts: dict[str, int] = defaultdict(int)
    for demand in demands:
        counts[str(_q(demand, "0.001"))] += 1
    return dict(counts)


def _write_day(ns_id, res_id, day, source, rows, every) -> None:
    allocated = [s.allocated for s, _, _ in rows]
    waits = [Decimal(s.wait_seconds) for s, _, _ in rows if s.wait_seconds is not None]
    utilization = _mean([s.utilization for s, _, _ in every if s.utilization is not None])
    memory = _mean([s.memory_used_mib for s, _, _ in every if s.memory_used_mib is not None])
    wait_mean = _mean(waits)
    last = max(rows, key=lambda r: r[0].timestamp)
    UsageDaily.objects.update_or_create(
        team_namespace_id=ns_id,
        resource_id=res_id,
        day=day,
        defaults={
            "source": source,
            "samples": len(rows),
            "peak": max(allocated),
            "p95": _q(percentile(allocated, P95), "0.001"),
            "mean": _q(_mean(allocated), "0.001"),
            "utilization_mean": None if utilization is None else _q(utilization, "0.01"),
            "memory_used_mean_mib": None if memory is None else _q(memory, "0.1"),
            "gpu_hours": _q(sum((s.allocated * t for s, t, _ in rows), Decimal(0)) / HOUR, "0.001"),
            "borrowed_gpu_hours": _q(
                sum((max(s.allocated - g, 0) * t for s, t, g in rows), Decimal(0)) / HOUR, "0.001"
            ),
            "idle_guaranteed_gpu_hours": _q(
                sum((max(g - s.allocated, 0) * t for s, t, g in rows), Decimal(0)) / HOUR, "0.001"
            ),
            "guarantee": last[2],
            "pending_wait_seconds": int(max(waits)) if waits else None,
            "pending_wait_mean_seconds": None if wait_mean is None else int(_q(wait_mean, "1")),
            "pending_peak": max(s.pending for s, _, _ in rows),
            "evictions": sum(s.evictions for s, _, _ in every),
            "demand_counts": demand_counts([s.allocated + s.pending for s, _, _ in rows]),
        },
    )


# --------------------------------------------------------------------------------------------
# Retention


def usage_prune(*, now: datetime | None = None) -> int:
    """Delete raw samples older than ``USAGE_RETENTION_DAYS`` (whole days, so no day is left
    half-pruned), in batches; rollups are kept. Returns how many were deleted. Where the
    samples are partitioned by month (PostgreSQL) a month goes whole, by dropping its
    partition, once all of it is past the retention."""
    now = now or timezone.now()
    tz = ZoneInfo(settings.TIME_ZONE)
    first_kept = (now.astimezone(tz) - timedelta(days=settings.USAGE_RETENTION_DAYS)).date()
    cutoff = datetime.combine(first_kept, time.min, tzinfo=tz)
    if partitioned():
        return drop_before(cutoff)
    deleted = 0
    while True:
        ids = list(
            UsageSample.objects.filter(timestamp__lt=cutoff).values_list("id", flat=True)[
                :PRUNE_BATCH
            ]
        )
        if not ids:
            return deleted
        deleted += UsageSample.objects.filter(id__in=ids).delete()[0]


def usage_rollup_recent(*, now: datetime | None = None) -> RollupResult:
    """The beat's rollup: yesterday (late samples) and today so far, then pruning."""
    now = now or timezone.now()
    today = now.astimezone(ZoneInfo(settings.TIME_ZONE)).date()
    result = usage_rollup(start=today - timedelta(days=1), end=today)
    usage_prune(now=now)
    return result
