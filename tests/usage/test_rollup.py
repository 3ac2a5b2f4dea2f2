"""Daily rollups: hand-checked figures, the PostgreSQL statement against the Python path, and
pruning that keeps the rollups."""

import random
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from quotas.models import AllocationVersion
from quotas.services import allocation_set
from tests.support.db_roles import as_application_role
from tests.support.locks import require_postgresql
from usage import rollup
from usage.models import UsageDaily, UsageSample
from usage.rollup import usage_prune, usage_rollup
from usage.selectors import typical_daily_peaks, usage_daily_for
from usage.stats import stood_for

DAY = date(2025, 3, 1)
MARCH_3 = date(2025, 3, 3)


def at(hour: int, minute: int = 0, day: date = DAY) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC)


def sample(ns, gpu, when, allocated, source="cluster", **extra):
    return UsageSample.objects.create(
        team_namespace=ns,
        resource=gpu,
        timestamp=when,
        allocated=Decimal(allocated),
        source=source,
        **extra,
    )


def test_each_sample_stands_until_the_next_the_last_since_the_previous_at_most_the_gap():
    gap = Decimal(3600)
    times = [at(0), at(0, 5), at(3), at(3, 20)]
    # 5 minutes; 2 h 55 capped at the gap; 20 minutes; the last since the previous.
    assert stood_for(times, gap) == [300, 3600, 1200, 1200]
    # A later sample past those given: the last stands for the gap.
    assert stood_for(times, gap, more_after=True)[-1] == 3600
    # A lone sample: nothing (no neighbour), or the gap (one before, further away).
    assert stood_for([at(1)], gap) == [0]
    assert stood_for([at(1)], gap, more_before=True) == [3600]
    assert stood_for([at(1)], gap, more_after=True) == [3600]
    assert stood_for([], gap) == []


@pytest.mark.django_db
def test_a_day_is_rolled_up_by_hand(ns_a, gpu, alloc_a):
    # Four samples six hours apart: each stands for at most USAGE_SAMPLE_MAX_GAP_SECONDS (1 h).
    sample(ns_a, gpu, at(0), 2, pending=Decimal(3), pending_pods=1, wait_seconds=600)
    sample(ns_a, gpu, at(6), 8, evictions=2)
    sample(ns_a, gpu, at(12), 10, pending=Decimal(1), pending_pods=1, wait_seconds=100)
    sample(ns_a, gpu, at(18), 4)
    # A second source with fewer samples: only its utilization counts.
    sample(ns_a, gpu, at(3), 16, source="csv", utilization=Decimal(40))
    sample(ns_a, gpu, at(9), 16, source="csv", utilization=Decimal(60))

    assert usage_rollup(start=DAY, end=DAY).days == 1
    day = UsageDaily.objects.get()
    assert (day.source, day.samples) == ("cluster", 4)
    assert day.peak == 10
    assert day.mean == 6
    assert day.p95 == Decimal("9.7")  # 8 + (10 - 8) * 0.85
    assert day.gpu_hours == 24  # (2 + 8 + 10 + 4) × 1 h
    # Guarantee 6 (the first version's, the samples are older than it).
    assert day.guarantee == 6
    assert day.borrowed_gpu_hours == 6  # (8 - 6) + (10 - 6)
    assert day.idle_guaranteed_gpu_hours == 6  # (6 - 2) + (6 - 4)
    assert day.utilization_mean == 50
    assert day.pending_peak == 3
    assert day.pending_wait_seconds == 600
    assert day.pending_wait_mean_seconds == 350
    assert day.evictions == 2
    # The cluster's four samples by demand, allocated + pending.
    assert day.demand_counts == {"5.000": 1, "8.000": 1, "11.000": 1, "4.000": 1}


@pytest.mark.django_db
def test_the_guarantee_in_force_at_each_sample_counts(ns_a, gpu, alloc_a, admin):
    allocation_set(team_namespace=ns_a, resource=gpu, guarantee=2, cap=10, acting_user=admin)
    AllocationVersion.objects.filter(version=2).update(changed_at=at(12))
    sample(ns_a, gpu, at(10), 4)  # guarantee 6: 2 idle
    sample(ns_a, gpu, at(11), 4)  # guarantee 6: 2 idle
    sample(ns_a, gpu, at(12), 4)  # guarantee 2: 2 borrowed
    sample(ns_a, gpu, at(13), 4)  # guarantee 2: 2 borrowed
    usage_rollup(start=DAY, end=DAY)
    day = UsageDaily.objects.get()
    assert (day.idle_guaranteed_gpu_hours, day.borrowed_gpu_hours) == (4, 4)
    assert day.guarantee == 2


@pytest.mark.django_db
def test_a_sample_near_midnight_stands_until_the_next_days_first(ns_a, gpu, alloc_a):
    sample(ns_a, gpu, at(23, 50), 6)
    sample(ns_a, gpu, at(0, 0, DAY + timedelta(days=1)), 6)
    usage_rollup(start=DAY, end=DAY)
    day = UsageDaily.objects.get()
    assert day.gpu_hours == 1  # 6 GPUs for 10 minutes
    assert day.idle_guaranteed_gpu_hours == 0


@pytest.mark.django_db
def test_a_sources_last_sample_after_midnight_stands_since_the_previous_days(ns_a, gpu, alloc_a):
    # Both paths: the previous sample lies before the days rolled up, and still counts.
    sample(ns_a, gpu, at(23, 30, DAY - timedelta(days=1)), 6)
    sample(ns_a, gpu, at(0, 10), 6)
    assert usage_rollup(start=DAY, end=DAY).days == 1
    day = UsageDaily.objects.get()
    assert (day.day, day.samples) == (DAY, 1)
    assert day.gpu_hours == 4  # 6 GPUs for the 40 minutes since the previous sample


@pytest.mark.django_db
def test_a_sample_before_a_hole_past_the_days_stands_for_the_longest_gap(ns_a, gpu, alloc_a):
    # Both paths: the source stops at 23:55 and comes back after 2 a.m., further than the
    # longest gap (1 h) past the day. The 23:55 sample stands for that gap, rolled up alone or
    # with the next day; not since the previous sample.
    sample(ns_a, gpu, at(23, 50), 6)
    sample(ns_a, gpu, at(23, 55), 6)
    sample(ns_a, gpu, at(2, 10, DAY + timedelta(days=1)), 6)
    assert usage_rollup(start=DAY, end=DAY).days == 1
    alone = UsageDaily.objects.get(day=DAY).gpu_hours
    assert alone == Decimal("6.5")  # 6 GPUs for 5 minutes, then for an hour
    assert usage_rollup(start=DAY, end=DAY + timedelta(days=1)).days == 2
    assert UsageDaily.objects.get(day=DAY).gpu_hours == alone


@pytest.mark.django_db
def test_a_lone_sample_long_after_the_previous_stands_for_the_longest_gap(ns_a, gpu, alloc_a):
    # Both paths: the previous sample lies a day before the days rolled up, and the last one of
    # the source stands since it, at most the longest gap.
    sample(ns_a, gpu, at(8, 0, DAY - timedelta(days=1)), 6)
    sample(ns_a, gpu, at(12, 0), 6)
    assert usage_rollup(start=DAY, end=DAY).days == 1
    assert UsageDaily.objects.get(day=DAY).gpu_hours == 6
    assert usage_rollup(start=DAY - timedelta(days=1), end=DAY).days == 2
    assert UsageDaily.objects.get(day=DAY).gpu_hours == 6


@pytest.mark.django_db
def test_the_application_role_rolls_up_where_functions_are_not_left_to_public(ns_a, gpu, alloc_a):
    require_postgresql("the rollup's function and the application role are PostgreSQL's")
    # The next sample lies past the day's reach: the statement asks usage_source_sampled().
    sample(ns_a, gpu, at(23, 55), 6)
    sample(ns_a, gpu, at(2, 10, DAY + timedelta(days=1)), 6)
    with connection.cursor() as cursor:
        cursor.execute(
            "REVOKE EXECUTE ON FUNCTION usage_source_sampled("
            "bigint, bigint, varchar, timestamptz, timestamptz) FROM PUBLIC"
        )
    with as_application_role():  # the documented grants
        assert usage_rollup(start=DAY, end=DAY).days == 1
    assert UsageDaily.objects.get().gpu_hours == 6


@pytest.mark.django_db
def test_rollup_is_idempotent_and_follows_corrected_samples(ns_a, gpu, alloc_a):
    first = sample(ns_a, gpu, at(0), 2)
    sample(ns_a, gpu, at(1), 2)
    usage_rollup(start=DAY, end=DAY)
    usage_rollup(start=DAY, end=DAY)
    assert UsageDaily.objects.get().peak == 2
    first.allocated = Decimal(5)
    first.save()
    usage_rollup(start=DAY, end=DAY)
    assert UsageDaily.objects.get().peak == 5


def _fill_random(namespaces, gpu, days=3):
    rng = random.Random(7)
    rows = []
    for ns in namespaces:
        for d in range(days):
            start = datetime(2025, 3, 1 + d, tzinfo=UTC)
            for i in range(0, 288, rng.choice([1, 2, 3])):
                when = start + timedelta(minutes=5 * i)
                pending = Decimal(rng.choice([0, 0, 0, 1, 2]))
                rows.append(
                    UsageSample(
                        team_namespace=ns,
                        resource=gpu,
                        timestamp=when,
                        allocated=Decimal(rng.randint(0, 12)) + Decimal(rng.choice([0, "0.5"])),
                        utilization=Decimal(rng.randint(0, 10000)) / 100
                        if rng.random() < 0.5
                        else None,
                        pending=pending,
                        pending_pods=int(pending),
                        wait_seconds=rng.randint(1, 5000) if pending else None,
                        evictions=rng.choice([0, 0, 0, 1]),
                        source="cluster",
                    )
                )
            for i in range(0, 288, 12):  # a sparser second source
                rows.append(
                    UsageSample(
                        team_namespace=ns,
                        resource=gpu,
                        timestamp=start + timedelta(minutes=5 * i + 1),
                        allocated=Decimal(rng.randint(0, 12)),
                        utilization=Decimal(rng.randint(0, 100)),
                        source="prometheus",
                    )
                )
    UsageSample.objects.bulk_create(rows)


FIGURES = [
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
    "demand_counts",
]


def _snapshot():
    return {
        (d.team_namespace_id, d.resource_id, d.day): tuple(getattr(d, f) for f in FIGURES)
        for d in UsageDaily.objects.all()
    }


@pytest.mark.django_db
def test_postgresql_statement_and_python_path_agree(ns_a, ns_b, gpu, alloc_a, alloc_b, admin):
    if connection.vendor != "postgresql":
        pytest.skip("the SQL path runs on PostgreSQL only")
    allocation_set(team_namespace=ns_a, resource=gpu, guarantee=3, cap=10, acting_user=admin)
    AllocationVersion.objects.filter(allocation__team_namespace=ns_a, version=2).update(
        changed_at=datetime(2025, 3, 2, 7, 3, tzinfo=UTC)
    )
    _fill_random([ns_a, ns_b], gpu)
    start, end = date(2025, 3, 1), date(2025, 3, 2)  # the third day only gives the last lead
    assert rollup._rollup_python(start, end, None) == 4
    by_python = _snapshot()
    UsageDaily.objects.all().delete()
    assert rollup._rollup_postgresql(start, end, None) == 4
    by_sql = _snapshot()
    assert by_sql == by_python
    # Restricted to one cluster, the same.
    UsageDaily.objects.all().delete()
    rollup._rollup_postgresql(start, end, ns_a.cluster_id)
    assert _snapshot() == by_python


def test_a_range_is_cut_into_runs_of_consecutive_days_as_even_as_they_go():
    first = date(2025, 3, 1)
    assert rollup._parts(first, first + timedelta(days=6), 3) == [
        (first, first + timedelta(days=2)),
        (first + timedelta(days=3), first + timedelta(days=4)),
        (first + timedelta(days=5), first + timedelta(days=6)),
    ]
    second = first + timedelta(days=1)
    assert rollup._parts(first, second, 5) == [(first, first), (second, second)]
    assert rollup._parts(first, first + timedelta(days=9), 0) == [
        (first, first + timedelta(days=9))
    ]


@pytest.mark.django_db(transaction=True)
def test_a_range_rolled_up_in_parts_on_their_own_connections_gives_the_one_statements_figures(
    ns_a, ns_b, gpu, alloc_a, alloc_b, admin, settings
):
    require_postgresql("the parts are PostgreSQL statements; on SQLite the days go in Python")
    allocation_set(team_namespace=ns_a, resource=gpu, guarantee=3, cap=10, acting_user=admin)
    AllocationVersion.objects.filter(allocation__team_namespace=ns_a, version=2).update(
        changed_at=at(7, 3, MARCH_3)
    )
    _fill_random([ns_a, ns_b], gpu, days=6)
    # ns_b's samples end on the first minutes of a part's first day: that last one stands
    # since the previous day's, which the part's own days do not hold.
    UsageSample.objects.filter(team_namespace=ns_b, timestamp__gte=at(0, 0, MARCH_3)).delete()
    sample(ns_b, gpu, at(0, 10, MARCH_3), 9)
    # ns_a's sources stop at 22:00 on a part's last day and come back at 2 a.m., further than
    # the longest gap past the part: its last samples stand for that gap in both.
    UsageSample.objects.filter(
        team_namespace=ns_a,
        timestamp__gte=at(22, 0, date(2025, 3, 4)),
        timestamp__lt=at(2, 0, date(2025, 3, 5)),
    ).delete()
    start, end = date(2025, 3, 1), date(2025, 3, 5)

    settings.USAGE_ROLLUP_CONNECTIONS = 1
    with CaptureQueriesContext(connection) as here:
        assert usage_rollup(start=start, end=end).days == 8
    assert any("INSERT INTO quotas_usagedaily" in q["sql"] for q in here.captured_queries)
    whole = _snapshot()
    assert rollup._rollup_python(start, end, None) == 8
    assert _snapshot() == whole

    UsageDaily.objects.all().delete()
    settings.USAGE_ROLLUP_CONNECTIONS = 3  # 1-2, 3-4 and 5 March
    with CaptureQueriesContext(connection) as here:
        assert usage_rollup(start=start, end=end).days == 8
    # The parts ran on connections of their own, not on this one.
    assert not any("quotas_usagedaily" in q["sql"] for q in here.captured_queries)
    assert _snapshot() == whole
    # Inside a transaction the caller holds, one statement on its connection.
    UsageDaily.objects.all().delete()
    with transaction.atomic(), CaptureQueriesContext(connection) as here:
        assert usage_rollup(start=start, end=end).days == 8
    assert any("INSERT INTO quotas_usagedaily" in q["sql"] for q in here.captured_queries)
    assert _snapshot() == whole


@pytest.mark.django_db
def test_pruning_keeps_rollups_and_a_later_rollup_leaves_them(ns_a, gpu, alloc_a, settings):
    settings.USAGE_RETENTION_DAYS = 10
    now = datetime(2025, 3, 20, 12, tzinfo=UTC)
    sample(ns_a, gpu, at(5), 3)  # 19 days old
    sample(ns_a, gpu, datetime(2025, 3, 10, 0, tzinfo=UTC), 4)  # day 10 days back: kept
    sample(ns_a, gpu, datetime(2025, 3, 9, 23, 59, tzinfo=UTC), 4)  # pruned
    usage_rollup(start=DAY, end=DAY)
    assert usage_prune(now=now) == 2
    assert list(UsageSample.objects.values_list("allocated", flat=True)) == [4]
    usage_rollup(start=DAY, end=date(2025, 3, 10))
    assert UsageDaily.objects.get(day=DAY).peak == 3


@pytest.mark.django_db
def test_usage_daily_for_and_typical_daily_peaks(ns_a, ns_b, gpu, alloc_a, alloc_b, cluster):
    for d in range(20):
        day = DAY + timedelta(days=d)
        sample(ns_a, gpu, at(1, 0, day), d)  # peaks 0..19
        sample(ns_b, gpu, at(1, 0, day), 2)
    usage_rollup(start=DAY, end=DAY + timedelta(days=19))
    rows = usage_daily_for(cluster=cluster, start=DAY, end=DAY + timedelta(days=1))
    assert [(r.namespace, r.day, r.peak) for r in rows] == [
        ("team-a-training", DAY, 0),
        ("team-a-training", DAY + timedelta(days=1), 1),
        ("team-b-inference", DAY, 2),
        ("team-b-inference", DAY + timedelta(days=1), 2),
    ]
    assert rows[0].team == "team-a" and rows[0].workload_class == "training"
    assert usage_daily_for(cluster="demo", start=DAY, end=DAY)[0].peak == 0
    facts = typical_daily_peaks(cluster=cluster, today=DAY + timedelta(days=20))
    assert [(f.namespace, f.typical_daily_peak) for f in facts] == [
        ("team-a-training", Decimal("18.05")),  # p95 of 0..19
        ("team-b-inference", Decimal(2)),
    ]
    # A request's validation reads the namespaces in question only.
    only_b = typical_daily_peaks(
        cluster=cluster, today=DAY + timedelta(days=20), namespace_ids=[ns_b.pk]
    )
    assert [(f.namespace, f.typical_daily_peak) for f in only_b] == [
        ("team-b-inference", Decimal(2))
    ]
