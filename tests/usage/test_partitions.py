"""The samples' month partitions (PostgreSQL): made ahead and on import, samples in their month
(those that came first, in the default partition, move over), retention that drops whole
months, a day's rollup that reads one month, two workers making the same month. On SQLite the
samples are one table and none of this applies."""

import io
import threading
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.support.locks import require_postgresql
from usage import csv_copy, partitions
from usage.csv_import import usage_import_csv
from usage.models import UsageSample
from usage.rollup import usage_prune, usage_rollup
from usage.tasks import ensure_sample_partitions

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _postgresql():
    require_postgresql("the samples are partitioned on PostgreSQL only")
    assert partitions.partitioned()


def _sample(ns, gpu, when: datetime, allocated: int = 1) -> None:
    UsageSample.objects.create(
        team_namespace=ns, resource=gpu, timestamp=when, allocated=allocated, source="cluster"
    )


def _where() -> dict[str, int]:
    """How many samples each partition holds."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tableoid::regclass::text, count(*) FROM quotas_usagesample GROUP BY 1"
        )
        return dict(cursor.fetchall())


def _months() -> list[date]:
    return [p.month for p in partitions.partitions()]


def test_months_made_ahead_take_over_the_samples_that_came_first(plan, gpu):
    ns = plan["team-a"]
    early = datetime(2031, 5, 31, 23, 59, tzinfo=UTC)
    _sample(ns, gpu, early, 3)
    _sample(ns, gpu, datetime(2031, 6, 1, tzinfo=UTC), 4)
    assert _where() == {partitions.DEFAULT: 2}

    made = partitions.ensure_months(date(2031, 5, 3), date(2031, 6, 30))
    assert made == ["quotas_usagesample_p2031_05", "quotas_usagesample_p2031_06"]
    assert _where() == {"quotas_usagesample_p2031_05": 1, "quotas_usagesample_p2031_06": 1}
    # Nothing lost or changed, and the key still holds across the partitions.
    assert sorted(UsageSample.objects.values_list("timestamp", "allocated")) == [
        (early, Decimal(3)),
        (datetime(2031, 6, 1, tzinfo=UTC), Decimal(4)),
    ]
    assert partitions.ensure_months(date(2031, 5, 1), date(2031, 6, 1)) == []
    _sample(ns, gpu, datetime(2031, 6, 15, tzinfo=UTC))
    assert _where()["quotas_usagesample_p2031_06"] == 2


def test_the_beat_makes_last_month_to_three_ahead(plan, gpu):
    made = partitions.ensure_ahead(today=date(2032, 1, 15))
    expected = [date(2031, 12, 1), *(date(2032, m, 1) for m in (1, 2, 3, 4))]
    assert made == [partitions.partition_name(m) for m in expected]
    assert partitions.ensure_ahead(today=date(2032, 1, 31)) == []
    # The beat's task, today: this month's partition and the next are there.
    ensure_sample_partitions()
    this = partitions.month_start(timezone.now())
    assert {this, partitions.next_month(this)} <= set(_months())


@pytest.mark.parametrize("chunk", [csv_copy.CHUNK, 7])
@pytest.mark.parametrize("timestamp_first", [True, False])
def test_an_import_writes_into_its_months(plan, gpu, monkeypatch, chunk, timestamp_first):
    # Read in pieces of 7 characters, lines and months are cut anywhere.
    monkeypatch.setattr(csv_copy, "CHUNK", chunk)
    rows = []
    start = datetime(2033, 3, 31, 22, tzinfo=UTC)
    for step in range(5):  # across the end of March
        when = (start + timedelta(hours=step)).isoformat()
        rows.append([when, "demo", "team-a-training", "nvidia.com/gpu", str(step)])
    header = ["timestamp", "cluster", "namespace", "resource", "allocated"]
    if not timestamp_first:
        header, rows = header[1:] + header[:1], [r[1:] + r[:1] for r in rows]
    text = "\n".join(",".join(r) for r in [header, *rows]) + "\n"
    result = usage_import_csv(stream=io.StringIO(text), rollup=False)
    assert result.method == "copy"
    assert result.imported == 5
    assert {date(2033, 2, 1), date(2033, 3, 1), date(2033, 4, 1), date(2033, 5, 1)} <= set(
        _months()
    )
    assert _where() == {"quotas_usagesample_p2033_03": 2, "quotas_usagesample_p2033_04": 3}


def test_an_import_row_by_row_moves_its_samples_into_their_months(plan, gpu):
    lines = ["timestamp,cluster,namespace,resource,allocated"]
    lines += [f"2033-0{m}-15T12:00:00Z,demo,team-a-training,nvidia.com/gpu,{m}" for m in (6, 7)]
    result = usage_import_csv(stream=io.StringIO("\n".join(lines) + "\n"), copy=False)
    assert result.method != "copy" and result.imported == 2
    assert _where() == {"quotas_usagesample_p2033_06": 1, "quotas_usagesample_p2033_07": 1}


def test_retention_drops_whole_months_and_keeps_the_month_it_cuts(plan, gpu, settings):
    ns = plan["team-a"]
    partitions.ensure_months(date(2034, 1, 1), date(2034, 3, 1))
    for day in (date(2034, 1, 5), date(2034, 1, 31), date(2034, 2, 3), date(2034, 3, 1)):
        _sample(ns, gpu, datetime(day.year, day.month, day.day, 12, tzinfo=UTC))
    _sample(ns, gpu, datetime(2033, 6, 1, tzinfo=UTC))  # no month of its own: default
    settings.USAGE_RETENTION_DAYS = 30
    # Kept from 2034-02-10: January is past as a whole, February is not.
    assert usage_prune(now=datetime(2034, 3, 12, 8, tzinfo=UTC)) == 3
    assert date(2034, 1, 1) not in _months()
    assert _where() == {"quotas_usagesample_p2034_02": 1, "quotas_usagesample_p2034_03": 1}


def test_a_days_rollup_reads_its_month_only(plan, gpu):
    ns = plan["team-a"]
    partitions.ensure_months(date(2035, 1, 1), date(2035, 3, 1))
    for month in (1, 2, 3):
        _sample(ns, gpu, datetime(2035, month, 10, 12, tzinfo=UTC), month)
    with CaptureQueriesContext(connection) as queries:
        usage_rollup(start=date(2035, 2, 10), end=date(2035, 2, 10))
    reads = [q["sql"] for q in queries if "quotas_usagesample" in q["sql"]]
    assert reads
    with connection.cursor() as cursor:
        for sql in reads:
            cursor.execute(f"EXPLAIN {sql}")
            plan_text = "\n".join(row[0] for row in cursor.fetchall())
            assert "quotas_usagesample_p2035_02" in plan_text
            for other in ("p2035_01", "p2035_03", "_default"):
                assert f"quotas_usagesample{other}" not in plan_text, plan_text


@pytest.mark.django_db(transaction=True)
def test_two_workers_make_the_same_month_once(plan, gpu):
    ns = plan["team-a"]
    _sample(ns, gpu, datetime(2036, 7, 4, tzinfo=UTC))
    barrier = threading.Barrier(2)
    made, errors = [], []

    def work():
        try:
            barrier.wait()
            made.extend(partitions.ensure_months(date(2036, 7, 1), date(2036, 8, 1)))
        except Exception as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(made) == ["quotas_usagesample_p2036_07", "quotas_usagesample_p2036_08"]
    assert _where() == {"quotas_usagesample_p2036_07": 1}
    partitions.drop_before(datetime(2037, 1, 1, tzinfo=UTC))


@pytest.mark.django_db(transaction=True)
def test_the_migration_moves_the_samples_there_are_into_their_months(plan, gpu):
    from django.db.migrations.executor import MigrationExecutor

    ns = plan["team-a"]
    before = ("usage", "0004_usagedaily_demand_counts")
    MigrationExecutor(connection).migrate([before])
    try:
        assert not partitions.partitioned()
        with connection.cursor() as cursor:
            for when, allocated in (("2040-01-31T23:00Z", 1), ("2040-02-01T00:00Z", 2)):
                cursor.execute(
                    "INSERT INTO quotas_usagesample (team_namespace_id, resource_id, "
                    '"timestamp", allocated, pending, pending_pods, evictions, source) '
                    "VALUES (%s, %s, %s, %s, 0, 0, 0, 'csv')",
                    [ns.pk, gpu.pk, when, allocated],
                )
            cursor.execute("SELECT max(id) FROM quotas_usagesample")
            (last_id,) = cursor.fetchone()
    finally:
        # 0005_sample_partitions and every later migration, as the tests found the schema.
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    assert partitions.partitioned()
    assert _where() == {"quotas_usagesample_p2040_01": 1, "quotas_usagesample_p2040_02": 1}
    # The ids go on from where they were.
    _sample(ns, gpu, datetime(2040, 2, 2, tzinfo=UTC))
    assert UsageSample.objects.get(timestamp=datetime(2040, 2, 2, tzinfo=UTC)).id > last_id
    partitions.drop_before(datetime(2041, 1, 1, tzinfo=UTC))


# As deployed with a separate application role (deploy/postgres/audit-grants.sql), which may not
# make or drop tables: the samples still land and go, and the owner makes the months.


def test_the_application_role_cannot_make_months_and_the_samples_still_land(plan, gpu, caplog):
    from tests.support.db_roles import as_application_role

    ns = plan["team-a"]
    with as_application_role(), caplog.at_level("WARNING", logger="usage.partitions"):
        assert partitions.ensure_months(date(2036, 5, 1), date(2036, 6, 1)) == []
        ensure_sample_partitions()  # the beat's task as well: a warning, not a failure
        _sample(ns, gpu, datetime(2036, 5, 20, tzinfo=UTC), 2)
    warned = [r.getMessage() for r in caplog.records if r.name == "usage.partitions"]
    assert warned and "quotas_usagesample_p2036_05" in warned[0]
    assert "ensure_sample_partitions --from 2036-05" in warned[0]
    assert _where() == {partitions.DEFAULT: 1}
    # The owner makes the month; its sample moves in.
    assert partitions.ensure_months(date(2036, 5, 1), date(2036, 5, 1)) == [
        "quotas_usagesample_p2036_05"
    ]
    assert _where() == {"quotas_usagesample_p2036_05": 1}


def test_retention_as_the_application_role_deletes_the_old_samples(plan, gpu, settings):
    from tests.support.db_roles import as_application_role

    ns = plan["team-a"]
    partitions.ensure_months(date(2037, 1, 1), date(2037, 3, 1))
    for day in (date(2037, 1, 5), date(2037, 2, 3), date(2037, 2, 20), date(2037, 3, 1)):
        _sample(ns, gpu, datetime(day.year, day.month, day.day, 12, tzinfo=UTC))
    settings.USAGE_RETENTION_DAYS = 30
    with as_application_role():
        # Kept from 2037-02-10; the months stay (only their owner may drop them).
        assert usage_prune(now=datetime(2037, 3, 12, 8, tzinfo=UTC)) == 2
    assert date(2037, 1, 1) in _months()
    assert _where() == {"quotas_usagesample_p2037_02": 1, "quotas_usagesample_p2037_03": 1}


def test_the_owners_command_makes_the_months_and_says_when_it_may_not(plan, gpu):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from tests.support.db_roles import as_application_role

    out = io.StringIO()
    call_command("ensure_sample_partitions", "--from", "2024-07", "--months-ahead", "1", stdout=out)
    assert "made quotas_usagesample_p2024_07" in out.getvalue()
    _, last = partitions.kept_months(today=timezone.now().date(), months_ahead=1)
    assert not partitions.missing_months(date(2024, 7, 1), last)
    assert (
        out.getvalue()
        .rstrip()
        .endswith(f"every month from 2024-07 to {last:%Y-%m} has its partition")
    )
    with as_application_role(), pytest.raises(CommandError, match=r"p2023_01.*may not make"):
        call_command("ensure_sample_partitions", "--from", "2023-01", stdout=io.StringIO())
    with pytest.raises(CommandError, match="--from: give a month as YYYY-MM"):
        call_command("ensure_sample_partitions", "--from", "July", stdout=io.StringIO())
    with pytest.raises(CommandError, match="--months-ahead: from 0 to 24, got 30"):
        call_command("ensure_sample_partitions", "--months-ahead", "30", stdout=io.StringIO())
