"""What-if: the last month of a namespace and resource replayed from its stored samples against
other values, beside the same month under the values that were in force.

The replay counts demand as the samples saw it, what ran plus what waited (``allocated +
pending``), each sample standing for the time until the next sample of its source (the last
one: since the previous), at most ``USAGE_SAMPLE_MAX_GAP_SECONDS``, whether or not that
neighbour lies in the month, as the daily rollups count it. Under a guarantee G and a cap C,
at each sample:

- what runs is the demand up to the cap; the rest is **blocked** by the cap;
- what runs above the guarantee is **borrowed** (from the cohort: it may be reclaimed);
- guarantee that nothing runs on is **idle**;
- demand up to the guarantee is **covered** by it.

A day's samples come from one source, the one with most samples that day (ties: cluster, then
Prometheus, then CSV), so two sources never add up. It is a replay, not a simulation: demand
that waited for other reasons (no node fits, nothing to lend) counts as demand, and demand that
a higher cap would have let in is not invented.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from usage.in_force import ValuesAt, values_in_force
from usage.models import UsageSample
from usage.stats import stood_for

ZERO = Decimal(0)
HOUR = Decimal(3600)
WINDOW_DAYS = 30
SOURCE_PRIORITY = {"cluster": 0, "prometheus": 1, "csv": 2}


@dataclass(frozen=True)
class Point:
    """One sample: the seconds it stands for and the demand it saw."""

    seconds: Decimal
    demand: Decimal


@dataclass(frozen=True)
class Replay:
    """Unit-hours of a month under one pair of values (the values may change over the month)."""

    demand: Decimal
    covered: Decimal
    borrowed: Decimal
    blocked: Decimal
    idle: Decimal
    guaranteed: Decimal  # guarantee x time

    @property
    def covered_share(self) -> Decimal | None:
        """Share of the demand within the guarantee, or None without demand."""
        return self.covered / self.demand if self.demand else None

    @property
    def idle_share(self) -> Decimal | None:
        """Share of the guaranteed unit-hours left idle, or None without a guarantee."""
        return self.idle / self.guaranteed if self.guaranteed else None


def replay(points: Iterable[tuple[Point, Decimal, Decimal]]) -> Replay:
    """Each (point, guarantee, cap) counted as the module says, in unit-hours."""
    demand = covered = borrowed = blocked = idle = guaranteed = ZERO
    for point, guarantee, cap in points:
        ran = min(point.demand, cap)
        demand += point.demand * point.seconds
        covered += min(point.demand, guarantee) * point.seconds
        blocked += (point.demand - ran) * point.seconds
        borrowed += max(ran - guarantee, ZERO) * point.seconds
        idle += max(guarantee - ran, ZERO) * point.seconds
        guaranteed += guarantee * point.seconds
    return Replay(
        demand=demand / HOUR,
        covered=covered / HOUR,
        borrowed=borrowed / HOUR,
        blocked=blocked / HOUR,
        idle=idle / HOUR,
        guaranteed=guaranteed / HOUR,
    )


@dataclass(frozen=True)
class WhatIf:
    """One namespace and resource over the window: as it was, and under the proposed values."""

    namespace_id: int
    resource_id: int
    start: date
    end: date  # inclusive
    samples: int
    days: int  # days with samples
    guarantee: Decimal
    cap: Decimal
    was: Replay
    proposed: Replay


def _points_by_pair(
    pairs: set[tuple[int, int]], lo: datetime, hi: datetime
) -> dict[tuple[int, int], list[tuple[datetime, Point]]]:
    """The chosen source's timed samples of each pair in [lo, hi): the samples read with their
    neighbours up to the longest gap on either side, in one query (and, for a source whose
    last sample there has no later neighbour, one asking whether it has one further away)."""
    tz = ZoneInfo(settings.TIME_ZONE)
    max_gap = Decimal(settings.USAGE_SAMPLE_MAX_GAP_SECONDS)
    reach = timedelta(seconds=settings.USAGE_SAMPLE_MAX_GAP_SECONDS)
    series: dict[tuple[int, int, str], list[tuple[datetime, Decimal]]] = defaultdict(list)
    rows = (
        UsageSample.objects.filter(
            team_namespace_id__in={ns for ns, _ in pairs},
            resource_id__in={res for _, res in pairs},
            timestamp__gte=lo - reach,
            timestamp__lt=hi + reach,
        )
        .order_by("team_namespace_id", "resource_id", "source", "timestamp")
        .values_list(
            "team_namespace_id", "resource_id", "source", "timestamp", "allocated", "pending"
        )
    )
    for ns_id, res_id, source, at, allocated, pending in rows.iterator(chunk_size=5000):
        if (ns_id, res_id) in pairs:
            series[(ns_id, res_id, source)].append((at, allocated + pending))
    open_ended = [key for key, samples in series.items() if lo <= samples[-1][0] < hi]
    after = _with_samples(open_ended, timestamp__gte=hi + reach)
    # (pair, day) -> source -> timed points of that day
    days: dict[tuple[int, int], dict[date, dict[str, list]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    for key, samples in series.items():
        ns_id, res_id, source = key
        lone = key in open_ended and key not in after and len(samples) == 1
        seconds = stood_for(
            [at for at, _ in samples],
            max_gap,
            more_after=key in after,
            more_before=lone and bool(_with_samples([key], timestamp__lt=lo - reach)),
        )
        for (at, demand), stood in zip(samples, seconds, strict=True):
            if lo <= at < hi:
                days[(ns_id, res_id)][at.astimezone(tz).date()].setdefault(source, []).append(
                    (at, Point(seconds=stood, demand=demand))
                )
    chosen: dict[tuple[int, int], list[tuple[datetime, Point]]] = {}
    for pair, by_day in days.items():
        points = []
        for day in sorted(by_day):
            sources = by_day[day]
            source = min(sources, key=lambda s: (-len(sources[s]), SOURCE_PRIORITY.get(s, 9)))
            points.extend(sources[source])
        chosen[pair] = points
    return chosen


def _with_samples(keys: list[tuple[int, int, str]], **when) -> set[tuple[int, int, str]]:
    """Of the (namespace id, resource id, source) ``keys``, those with a sample ``when``."""
    if not keys:
        return set()
    which = Q()
    for ns_id, res_id, source in keys:
        which |= Q(team_namespace_id=ns_id, resource_id=res_id, source=source)
    return set(
        UsageSample.objects.filter(which, **when)
        .values_list("team_namespace_id", "resource_id", "source")
        .distinct()
    )


def window(now: datetime | None = None) -> tuple[date, date, datetime, datetime]:
    """The last WINDOW_DAYS whole days before today (in TIME_ZONE), and their bounds."""
    tz = ZoneInfo(settings.TIME_ZONE)
    today = (now or timezone.now()).astimezone(tz).date()
    start, end = today - timedelta(days=WINDOW_DAYS), today - timedelta(days=1)
    lo = datetime.combine(start, datetime.min.time(), tzinfo=tz)
    hi = datetime.combine(today, datetime.min.time(), tzinfo=tz)
    return start, end, lo, hi


def what_ifs(
    proposals: Iterable[tuple[int, int, Decimal, Decimal]], *, now: datetime | None = None
) -> list[WhatIf | None]:
    """For each (namespace id, resource id, guarantee, cap): the last month as it was and under
    those values, or None where no sample of the pair is stored in the window. Three queries
    however many proposals (the samples, the allocations, their versions), and one more when a
    source's last sample of the month has no later neighbour read with it."""
    proposals = list(proposals)
    if not proposals:
        return []
    start, end, lo, hi = window(now)
    pairs = {(ns_id, res_id) for ns_id, res_id, _, _ in proposals}
    points = _points_by_pair(pairs, lo, hi)
    values_at: ValuesAt = values_in_force(pairs) if points else (lambda *_: (ZERO, ZERO))
    tz = ZoneInfo(settings.TIME_ZONE)
    answers: list[WhatIf | None] = []
    for ns_id, res_id, guarantee, cap in proposals:
        series = points.get((ns_id, res_id))
        if not series:
            answers.append(None)
            continue
        was = replay((p, *values_at(ns_id, res_id, at)) for at, p in series)
        answers.append(
            WhatIf(
                namespace_id=ns_id,
                resource_id=res_id,
                start=start,
                end=end,
                samples=len(series),
                days=len({at.astimezone(tz).date() for at, _ in series}),
                guarantee=guarantee,
                cap=cap,
                was=was,
                proposed=replay((p, guarantee, cap) for _, p in series),
            )
        )
    return answers
