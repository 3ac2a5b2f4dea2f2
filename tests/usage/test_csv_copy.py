"""The usage import's COPY path (PostgreSQL) against its row-by-row path: for files of every
kind of good, odd and bad row, the same samples, the same errors with the same lines, fields
and words, the same counts and days; and files COPY cannot take go row by row, writing nothing
twice."""

import csv
import io
import random
import tracemalloc
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection

from quotas.models import TeamNamespace
from tests.support.locks import require_postgresql
from usage import csv_copy
from usage.csv_import import usage_import_csv
from usage.models import UsageSample

pytestmark = pytest.mark.django_db

HEADER = "timestamp,cluster,namespace,resource,allocated,utilization,pending,wait_seconds"

TIMESTAMPS = [
    "2025-03-01T00:00:00Z",
    "2025-03-01T00:05:00+00:00",
    "2025-03-01 00:10:00",
    "2025-03-01T00:15:00",
    "2025-03-01T00:20:00.5Z",
    "2025-03-01T00:25:00.123456+08:00",
    "2025-03-01T00:30:00.1234567Z",  # 7 digits: Python cuts, so it goes row by row
    "2025-03-01T00:35:00-14:00",
    "2025-03-01T00:40:00+15:00",
    "2025-03-01T24:00:00",
    "2025-03-01T00:45:60Z",
    "2025-03-01",
    "20250301T005000Z",
    "2025-03-01T00:55Z",
    " 2025-03-01T01:00:00Z ",
    "yesterday",
    "now",
    "",
]
AMOUNTS = ["0", "4", "4.5", "4.125", "4.1250", "4.1255", "1e3", "+5", " 6 ", "\t6", "-1", "x", ""]
AMOUNTS += ["99999999999", "100000000000", ".5", "5.", ".", "0006", "1_000", "NaN", "Infinity"]
UTILIZATION = ["", "0", "55.5", "100", "100.00", "100.01", "12.345", "12.3450", "x", "-1", "1e1"]
WAITS = ["", "0", "300", "1.9", "-5", "x", "2147483647", "2147483648", "999999999", "1e3"]
NAMES = [
    ("demo", "team-a-training"),
    ("demo", "team-b-inference"),
    ("demo", " team-a-training "),
    ("demo", "team-x"),
    ("nowhere", "team-a-training"),
    ("", "team-a-training"),
    ("demo", ""),
]
RESOURCES = ["nvidia.com/gpu", "amd.com/gpu", "", " nvidia.com/gpu"]


def _cell(value: str) -> str:
    return f'"{value}"' if any(c in value for c in ',"\n') or value.startswith(" ") else value


def _file(seed: int, rows: int = 300, *, odd_timestamps: bool = True) -> str:
    rng = random.Random(seed)
    lines = [HEADER]
    for _ in range(rows):
        cluster, namespace = rng.choice(NAMES) if rng.random() < 0.3 else NAMES[rng.randint(0, 1)]
        cells = [
            rng.choice(TIMESTAMPS)
            if odd_timestamps and rng.random() < 0.4
            else rng.choice(TIMESTAMPS[:6]),
            cluster,
            namespace,
            rng.choice(RESOURCES) if rng.random() < 0.2 else RESOURCES[0],
            rng.choice(AMOUNTS) if rng.random() < 0.4 else str(rng.randint(0, 8)),
            rng.choice(UTILIZATION),
            rng.choice(AMOUNTS) if rng.random() < 0.2 else rng.choice(["", "0", "2"]),
            rng.choice(WAITS),
        ]
        lines.append(",".join(_cell(c) for c in cells))
    return "\n".join(lines) + "\n"


def _samples() -> list[tuple]:
    return sorted(
        UsageSample.objects.values_list(
            "team_namespace_id",
            "resource_id",
            "timestamp",
            "allocated",
            "utilization",
            "pending",
            "wait_seconds",
            "source",
        )
    )


def _both(text: str) -> tuple:
    """The file imported by COPY, then by rows into an empty table: both results and tables."""
    by_copy = usage_import_csv(stream=io.StringIO(text), rollup=False)
    copied = _samples()
    UsageSample.objects.all().delete()
    by_rows = usage_import_csv(stream=io.StringIO(text), rollup=False, copy=False)
    return by_copy, copied, by_rows, _samples()


@pytest.fixture(autouse=True)
def _postgresql_only():
    require_postgresql("COPY is PostgreSQL's; on SQLite every import goes row by row")


@pytest.fixture
def world(plan, gpu):
    TeamNamespace.objects.filter(name="team-a-training").update(name="team-a-training")
    return plan


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata", "Europe/Berlin"])
@pytest.mark.parametrize("seed", range(6))
def test_copy_and_rows_give_the_same_samples_errors_and_days(settings, world, zone, seed):
    settings.TIME_ZONE = zone
    text = _file(seed)
    by_copy, copied, by_rows, rowed = _both(text)
    assert by_rows.method == "rows"
    assert by_copy.method in ("copy", "rows")
    assert copied == rowed
    assert [(e.line, e.field, e.message) for e in by_copy.errors] == [
        (e.line, e.field, e.message) for e in by_rows.errors
    ]
    assert (by_copy.rows, by_copy.error_count, by_copy.days) == (
        by_rows.rows,
        by_rows.error_count,
        by_rows.days,
    )


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata"])
@pytest.mark.parametrize("seed", range(4))
def test_a_file_whose_timestamps_are_all_plain_gives_the_same_as_row_by_row(
    settings, world, zone, seed
):
    """Its timestamps are checked as the file streams, not again in SQL; its other cells
    are of every kind."""
    settings.TIME_ZONE = zone  # one offset all year: a time without one is plain too
    text = _file(seed, odd_timestamps=False)
    starts = csv_copy._LineStarts({"timestamp": 0}, naive=True)
    starts.feed(text.split("\n", 1)[1])
    starts.close()
    assert starts.all_plain(300)
    by_copy, copied, by_rows, rowed = _both(text)
    assert by_copy.method == "copy"
    assert copied == rowed
    assert by_copy.errors == by_rows.errors
    assert (by_copy.rows, by_copy.error_count, by_copy.days) == (
        by_rows.rows,
        by_rows.error_count,
        by_rows.days,
    )


def test_lines_past_the_first_thousands_keep_their_numbers(world):
    """The staging table numbers the lines from a sequence drawn a thousand at a time."""
    start = datetime(2025, 3, 1, tzinfo=UTC)
    rows = [
        f"{(start + timedelta(minutes=5 * i)).isoformat()},demo,team-a-training,nvidia.com/gpu,"
        + ("x" if i in (1499, 2398) else "4")
        + ",,,"
        for i in range(2500)
    ]
    by_copy, copied, by_rows, rowed = _both("\n".join([HEADER, *rows]) + "\n")
    assert by_copy.method == "copy" and by_copy.rows == 2500
    assert [(e.line, e.field) for e in by_copy.errors] == [(1501, "allocated"), (2400, "allocated")]
    assert by_copy.errors == by_rows.errors
    assert copied == rowed and len(copied) == 2498


MONTHS = {f"{month:02d}" for month in range(1, 13)}


@pytest.mark.parametrize("naive", [False, True])
def test_the_timestamps_streamed_check_is_never_laxer_than_the_sqls(naive):
    """A line the streamed check counts as plain has a first cell the SQL's pattern takes;
    and with a month of 01-12 (the check also reads the month), the other way round."""
    rng = random.Random(5)
    cells = [c for c in TIMESTAMPS if c]
    alphabet = '0123456789-:T Z+.x,"\t'
    for base in TIMESTAMPS[:6] * 60:
        at = rng.randrange(len(base) + 1)
        cells.append(base[:at] + rng.choice(alphabet) + base[at + rng.choice([0, 1]) :])
    cells += [f"2025-{m:02d}-01T00:00:00Z" for m in range(15)]
    cells += [
        f"2025-03-01T00:00:00{f}{o}"
        for f in ("", ".1", ".123456", ".1234567")
        for o in ("", "Z", "+14:59", "+15:00", "-09:30", "+9:30", "+09:3")
    ]
    checked = 0
    for cell in cells:
        starts = csv_copy._LineStarts({"timestamp": 0}, naive=naive)
        starts.feed(f"{cell},demo,team-a-training,nvidia.com/gpu,4\n")
        starts.close()
        streamed = starts.all_plain(1)
        first = next(csv.reader([cell + ",x"]))[0]  # the cell as COPY reads it
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {csv_copy._plain_timestamp('%s', naive)}", [first])
            by_sql = cursor.fetchone()[0]
        if streamed:
            assert by_sql, cell
            checked += 1
        elif by_sql and not {",", '"'} & set(cell) and cell[5:7] in MONTHS:
            pytest.fail(f"{cell!r}: the SQL takes it, the streamed check does not")
    assert checked > 50


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin"])
def test_a_file_of_plain_and_odd_rows_is_copied_not_read_row_by_row(settings, world, zone):
    """No row here breaks COPY: the SQL takes the plain rows, the rules the rest (1e3, +5)."""
    settings.TIME_ZONE = zone
    text = "\n".join(
        [
            HEADER,
            "2025-03-01T00:00:00Z,demo,team-a-training,nvidia.com/gpu,4,55.5,2,300",
            "2025-03-01T00:05:00,demo,team-a-training,nvidia.com/gpu,1e0,,,1.9",
            "2025-03-01T00:10:00+01:00,demo,team-b-inference,nvidia.com/gpu,+5,12.345,,",
            "yesterday,demo,team-a-training,nvidia.com/gpu,4,,,",
            "2025-03-01T00:15:00Z,demo,team-x,nvidia.com/gpu,4,,,",
            '"2025-03-01T00:20:00Z","demo","team-a-training","nvidia.com/gpu","3","","",""',
        ]
    )
    by_copy, copied, by_rows, rowed = _both(text + "\n")
    assert by_copy.method == "copy"
    assert copied == rowed and len(copied) == 4
    assert [(e.line, e.field) for e in by_copy.errors] == [(5, "timestamp"), (6, "namespace")]
    assert by_copy.errors == by_rows.errors and by_copy.imported == 4
    naive = next(s for s in copied if s[3] == Decimal(1))
    assert naive[2].isoformat() == (
        "2025-03-01T00:05:00+00:00" if zone == "UTC" else "2025-02-28T23:05:00+00:00"
    )
    assert next(s for s in copied if s[3] == Decimal(5))[4] == Decimal("12.34")  # half-even
    assert next(s for s in copied if s[3] == Decimal(1))[6] == 1  # 1.9 s counts as 1


@pytest.mark.parametrize(
    "bad",
    [
        "2025-03-01T00:00:00Z,demo,team-a-training,nvidia.com/gpu,4,,,,extra",  # a cell too many
        "2025-03-01T00:00:00Z,demo,team-a-training,nvidia.com/gpu,4",  # too few: a good row
        "",  # a blank line
        "2025-02-30T00:00:00Z,demo,team-a-training,nvidia.com/gpu,4,,,",  # no such day
        '2025-03-01T00:00:00Z,demo,"team-a\ntraining",nvidia.com/gpu,4,,,',  # a line break
    ],
)
def test_what_copy_cannot_take_goes_row_by_row_and_writes_nothing_twice(world, bad):
    text = "\n".join(
        [
            HEADER,
            "2025-03-01T00:05:00Z,demo,team-a-training,nvidia.com/gpu,4,,,",
            bad,
            "2025-03-01T00:10:00Z,demo,team-a-training,nvidia.com/gpu,5,,,",
        ]
    )
    by_copy, copied, by_rows, rowed = _both(text + "\n")
    assert by_copy.method == "rows"
    assert copied == rowed and len(copied) in (2, 3)
    assert by_copy.errors == by_rows.errors and by_copy.imported == by_rows.imported


def test_a_repeated_sample_keeps_the_later_line_as_row_by_row(world):
    rows = [
        "2025-03-01T00:05:00Z,demo,team-a-training,nvidia.com/gpu,4,,,",
        "2025-03-01T00:05:00+00:00,demo,team-a-training,nvidia.com/gpu,1e0,,,",
        "2025-03-01T00:05:00Z,demo,team-a-training,nvidia.com/gpu,7,,,",
        "2025-03-01T00:05:00Z,demo,team-b-inference,nvidia.com/gpu,2,,,",
    ]
    by_copy, copied, _by_rows, rowed = _both("\n".join([HEADER, *rows]) + "\n")
    assert by_copy.method == "copy"
    assert copied == rowed
    assert sorted(s[3] for s in copied) == [Decimal(2), Decimal(7)]


def test_a_header_with_columns_in_another_order_and_unknown_ones(world):
    text = (
        "namespace,note,allocated,timestamp,resource,cluster\n"
        "team-a-training,hello,3,2025-03-01T00:00:00Z,nvidia.com/gpu,demo\n"
        "team-a-training,,4,2025-03-01T00:05:00Z,nvidia.com/gpu,demo\n"
    )
    by_copy, copied, _by_rows, rowed = _both(text)
    assert by_copy.method == "copy" and copied == rowed and len(copied) == 2
    assert {s[4] for s in copied} == {None} and {s[5] for s in copied} == {Decimal(0)}


def test_copy_streams_the_file_with_bounded_memory(world, tmp_path, monkeypatch):
    monkeypatch.setattr(csv_copy, "CHUNK", 1 << 14)

    def peak_of(n: int) -> int:
        UsageSample.objects.all().delete()
        path = tmp_path / f"{n}.csv"
        path.write_text(
            HEADER
            + "\n"
            + "".join(
                f"2025-03-{1 + i // 288:02d}T{i // 12 % 24:02d}:{i % 12 * 5:02d}:00Z,demo,"
                f"team-a-training,nvidia.com/gpu,{i % 9},{i % 100},0,\n"
                for i in range(n)
            )
        )
        with path.open(newline="") as stream:
            tracemalloc.start()
            result = usage_import_csv(stream=stream, rollup=False)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        assert result.method == "copy" and result.imported == n
        return peak

    small, large = peak_of(1_000), peak_of(8_000)
    # Eight times the rows (0.1 MB and 0.6 MB, 5 and 40 chunks), about the same memory.
    assert large < small * 2, (small, large)


def test_a_file_repeating_a_stored_sample_the_probes_miss_is_upserted(world):
    """New samples are inserted without ON CONFLICT when the rows looked up first are all new;
    a stored sample among the others makes that insert fail, and the file is upserted."""
    stored = "2025-03-01T00:05:00Z,demo,team-a-training,nvidia.com/gpu,4,,,"
    usage_import_csv(stream=io.StringIO(f"{HEADER}\n{stored}\n"), rollup=False)
    start = datetime(2025, 3, 2, tzinfo=UTC)
    b_gpu = "demo,team-b-inference,nvidia.com/gpu"
    rows = [
        f"{start + timedelta(minutes=5 * i):%Y-%m-%dT%H:%M:%SZ},{b_gpu},1,,,"
        for i in range(2 * csv_copy.PROBES)
    ]
    # Line 3 (the second row): the probes read every second line, from line 2.
    rows.insert(1, stored.replace(",4,", ",6,"))
    result = usage_import_csv(stream=io.StringIO("\n".join([HEADER, *rows]) + "\n"), rollup=False)
    assert result.method == "copy" and result.imported == len(rows) and not result.errors
    assert UsageSample.objects.count() == len(rows)
    assert UsageSample.objects.get(team_namespace__name="team-a-training").allocated == 6
    # The same file again: every probe finds its sample, and the values are replaced.
    again = usage_import_csv(
        stream=io.StringIO("\n".join([HEADER, *[r.replace(",1,", ",2,") for r in rows]]) + "\n"),
        rollup=False,
    )
    assert again.imported == len(rows) and UsageSample.objects.count() == len(rows)
    assert set(UsageSample.objects.values_list("allocated", flat=True)) == {2, 6}


def test_a_date_that_does_not_exist_goes_row_by_row_when_samples_are_stored(world):
    """With samples stored, the probe of stored samples meets the file's cells first: a date
    that does not exist still sends the file row by row, with its error."""
    b_gpu = "demo,team-b-inference,nvidia.com/gpu"
    stored = "\n".join(f"2025-03-01T00:{i:02d}:00Z,{b_gpu},4,,," for i in range(50))
    usage_import_csv(stream=io.StringIO(f"{HEADER}\n{stored}\n"), rollup=False)
    rows = [
        "2025-03-01T00:05:00Z,demo,team-a-training,nvidia.com/gpu,4,,,",
        "2025-02-30T00:00:00Z,demo,team-a-training,nvidia.com/gpu,4,,,",
        "2025-03-01T00:10:00Z,demo,team-a-training,nvidia.com/gpu,5,,,",
    ]
    result = usage_import_csv(stream=io.StringIO("\n".join([HEADER, *rows]) + "\n"), rollup=False)
    assert result.method == "rows" and result.imported == 2
    assert [(e.line, e.field) for e in result.errors] == [(3, "timestamp")]
    assert UsageSample.objects.count() == 52


def _staging_tables() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname FROM pg_class WHERE relname LIKE 'usage\\_import\\_raw\\_%'")
        return {name for (name,) in cursor.fetchall()}


def test_the_staging_table_goes_with_the_import_whichever_way_it_went(world):
    plain = "2025-03-01T00:05:00Z,demo,team-a-training,nvidia.com/gpu,4,,,"
    result = usage_import_csv(stream=io.StringIO(f"{HEADER}\n{plain}\n"), rollup=False)
    assert result.method == "copy" and result.imported == 1
    assert _staging_tables() == set()
    refused = plain.replace("03-01", "02-30")  # COPY's cast refuses it: the file goes by rows
    result = usage_import_csv(stream=io.StringIO(f"{HEADER}\n{refused}\n{plain}\n"), rollup=False)
    assert result.method == "rows" and [e.line for e in result.errors] == [2]
    assert _staging_tables() == set()


def test_the_next_import_drops_the_staging_table_of_a_connection_that_is_gone(world):
    """An import that died with its connection leaves its unlogged staging table; the next
    import drops it, and not the table of an import still running on another connection."""
    import psycopg

    settings_dict = connection.settings_dict
    other = psycopg.connect(
        host=settings_dict["HOST"] or None,
        port=settings_dict["PORT"] or None,
        dbname=settings_dict["NAME"],
        user=settings_dict["USER"],
        password=settings_dict["PASSWORD"] or None,
        autocommit=True,
    )
    try:
        running = f"{csv_copy.STAGING}{other.info.backend_pid}"
        other.execute(f"CREATE UNLOGGED TABLE {running} (c0 text)")
        with connection.cursor() as cursor:
            cursor.execute("SELECT max(pid) + 100000 FROM pg_stat_activity")
            gone = f"{csv_copy.STAGING}{cursor.fetchone()[0]}"
            cursor.execute(f"CREATE UNLOGGED TABLE {gone} (c0 text)")
            cursor.execute(f"CREATE UNLOGGED TABLE {csv_copy.STAGING}notapid (c0 text)")
        assert {running, gone} <= _staging_tables()
        plain = "2025-03-01T00:05:00Z,demo,team-a-training,nvidia.com/gpu,4,,,"
        assert usage_import_csv(stream=io.StringIO(f"{HEADER}\n{plain}\n"), rollup=False).imported
        assert _staging_tables() == {running, f"{csv_copy.STAGING}notapid"}
    finally:
        other.execute(f"DROP TABLE IF EXISTS {running}")
        other.close()


def test_the_staging_table_is_one_parallel_workers_may_read(world):
    """The checks and conversions are most of an import; PostgreSQL runs them in parallel only
    over a table its workers may read: not a temporary one."""
    with connection.cursor() as cursor:
        raw = csv_copy._staging_table(cursor)
        text = f"{HEADER}\n" + "2025-03-01T00:05:00Z,demo,team-a-training,nvidia.com/gpu,4,,,\n"
        stream = io.StringIO(text)
        first = stream.readline()
        header = csv_copy._header(first.strip().split(","))
        months = csv_copy._LineStarts({name: i for i, name in enumerate(header)}, naive=False)
        assert csv_copy._load(cursor, raw, stream, header, first, None, months) == 1
        # Parallel wherever it may be, however small the table (the setting's name before
        # PostgreSQL 16, then after).
        cursor.execute("SHOW server_version_num")
        forced = (
            "force_parallel_mode" if int(cursor.fetchone()[0]) < 160000 else "debug_parallel_query"
        )
        cursor.execute(f"SET LOCAL {forced} = on")
        cursor.execute(f"EXPLAIN SELECT count(*) FROM {raw} WHERE c0 ~ '^2025'")  # noqa: S608
        plan = "\n".join(line for (line,) in cursor.fetchall())
        cursor.execute(f"RESET {forced}")
        cursor.execute(f"DROP TABLE {raw}")
    assert "Gather" in plan, plan


def test_a_role_that_may_not_create_tables_imports_through_a_temporary_one(world):
    """As deployed with the application role of deploy/postgres/audit-grants.sql, which may
    not make tables: the staging table is a temporary one, and the import works. A leftover
    staging table it may not drop (another role's) is left alone."""
    from tests.support.db_roles import as_application_role
    from usage.partitions import ensure_months

    ensure_months(datetime(2025, 2, 1, tzinfo=UTC), datetime(2025, 4, 1, tzinfo=UTC))
    with connection.cursor() as cursor:
        cursor.execute("SELECT max(pid) + 100000 FROM pg_stat_activity")
        theirs = f"{csv_copy.STAGING}{cursor.fetchone()[0]}"
        cursor.execute(f"CREATE UNLOGGED TABLE {theirs} (c0 text)")
    rows = [
        f"2025-03-01T00:{i:02d}:00Z,demo,team-a-training,nvidia.com/gpu,{i % 5},,,"
        for i in range(9)
    ]
    with as_application_role(), connection.cursor() as cursor:
        cursor.execute("SELECT has_schema_privilege('public', 'CREATE')")
        assert cursor.fetchone()[0] is False
        result = usage_import_csv(
            stream=io.StringIO("\n".join([HEADER, *rows]) + "\n"), rollup=False
        )
    assert result.method == "copy" and result.imported == 9 and not result.errors
    assert UsageSample.objects.count() == 9
    assert theirs in _staging_tables()
