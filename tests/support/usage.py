"""A month of usage rollups for the plan's namespaces, and the suggestions computed from them;
two months of hourly samples for the backtest."""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from quotas.models import TeamNamespace
from usage.models import UsageDaily, UsageSample
from usage.rollup import usage_rollup
from usage.suggest import Period
from usage.suggestions import suggestions_compute

JUNE = date(2025, 6, 1)


def rollup(ns, resource, day, *, peak, p95=None, mean=None, pending=0, wait=None, util=None):
    peak = Decimal(peak)
    mean = Decimal(mean if mean is not None else peak)
    return UsageDaily.objects.create(
        team_namespace=ns,
        resource=resource,
        day=day,
        source="cluster",
        samples=288,
        peak=peak,
        p95=Decimal(p95 if p95 is not None else peak),
        mean=mean,
        gpu_hours=mean * 24,
        borrowed_gpu_hours=0,
        idle_guaranteed_gpu_hours=Decimal(0),
        pending_peak=Decimal(pending),
        pending_wait_seconds=wait,
        utilization_mean=util,
    )


def june_usage_create(alloc_a, alloc_b, gpu) -> date:
    """team-a-training (6/10) peaks at 3 every day; team-b-inference (4/6) steadily at 6."""
    for i in range(30):
        day = JUNE + timedelta(i)
        rollup(alloc_a.team_namespace, gpu, day, peak=3, mean=2, util=Decimal(40))
        rollup(alloc_b.team_namespace, gpu, day, peak=6, wait=120 if i == 3 else None)
    return JUNE


def june_suggestions_create(cluster) -> dict:
    suggestions_compute(cluster=cluster, month=JUNE, today=date(2025, 7, 1))
    return {s.team_namespace.name: s for s in cluster.suggestions.select_related("team_namespace")}


# --- daily figures for the suggestion maths (usage.suggest), no database ---------------

JUNE_PERIOD = Period(start=date(2025, 6, 1), end=date(2025, 6, 30), today=date(2025, 7, 1))
NONE = Decimal(0)
D = Decimal


@dataclass(frozen=True)
class Day:
    day: date
    peak: Decimal
    p95: Decimal
    mean: Decimal
    samples: int = 288
    utilization_mean: Decimal | None = None
    gpu_hours: Decimal = NONE
    borrowed_gpu_hours: Decimal = NONE
    idle_guaranteed_gpu_hours: Decimal = NONE
    pending_peak: Decimal = NONE
    pending_wait_seconds: int | None = None
    pending_wait_mean_seconds: int | None = None
    evictions: int = 0


def days(period: Period, n: int | None = None, **figures) -> list[Day]:
    count = n if n is not None else period.days
    return [
        Day(
            day=period.start + timedelta(i),
            peak=D(figures.get("peak", 0)),
            p95=D(figures.get("p95", figures.get("peak", 0))),
            mean=D(figures.get("mean", figures.get("peak", 0))),
            gpu_hours=D(figures.get("mean", figures.get("peak", 0))) * 24,
            utilization_mean=figures.get("utilization"),
        )
        for i in range(count)
    ]


# --- hourly samples of two months, for the backtest (usage/backtest.py) ------------------

MAY = date(2025, 5, 1)
JULY = date(2025, 7, 1)


def hourly_samples(
    ns: TeamNamespace, resource, start: date, end: date, demand: Callable[[datetime], int]
) -> None:
    """A sample an hour from ``start`` to the day before ``end`` (UTC, the tests' time zone),
    its demand ``demand(timestamp)`` GPUs (allocated; nothing pending); then the rollups."""
    t = datetime(start.year, start.month, start.day, tzinfo=UTC)
    stop = datetime(end.year, end.month, end.day, tzinfo=UTC)
    rows = []
    while t < stop:
        rows.append(
            UsageSample(
                team_namespace=ns,
                resource=resource,
                timestamp=t,
                allocated=Decimal(demand(t)),
                pending=Decimal(0),
                source="cluster",
            )
        )
        t += timedelta(hours=1)
    UsageSample.objects.bulk_create(rows, batch_size=2000)
    usage_rollup(start=start, end=end - timedelta(days=1), cluster_id=ns.cluster_id)


def flat(level: int) -> Callable[[datetime], int]:
    return lambda t: level


def bursty(level: int, hours: int) -> Callable[[datetime], int]:
    """``level`` the first ``hours`` hours of every day, else nothing."""
    return lambda t: level if t.hour < hours else 0


def backtest_months_create(alloc_a, alloc_b, gpu) -> date:
    """May and June 2025: team-a-training steady at 3 GPUs, team-b-inference at 8 GPUs six
    hours a day and idle the rest (16 GPUs, caps at most 8). Returns June, the month scored."""
    hourly_samples(alloc_a.team_namespace, gpu, MAY, JULY, flat(3))
    hourly_samples(alloc_b.team_namespace, gpu, MAY, JULY, bursty(8, 6))
    return JUNE
