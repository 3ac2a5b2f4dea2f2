"""Benchmark: usage import and daily rollup on PostgreSQL, against plain COPY of the same file
and one hand-written SQL aggregate over the same table, in the same run.

    python -m bench.bench_usage [--days 105 --namespaces 1000]   (or: make bench)
    BENCH_QUICK=1 python -m bench.bench_usage                     (2 days x 50 namespaces)

Full size: 105 days of 5-minute samples for 1,000 team namespaces, 30.24 million rows in four
month partitions (a year of them is about 105 million). Besides the import and the rollup:
a namespace's month of samples as the portal reads it against the same rows read by one
plain SQL statement, the dashboard's usage chart of a team against one hand-written
aggregate of the same rollups, the samples' table and index size on disk per million, and
the import's floor: the imported rows alone COPYed (typed, in key order) into an empty table of
the samples' shape, what no check or conversion can take away. Needs a
PostgreSQL server: BENCH_DATABASE_URL, else DATABASE_URL if it is PostgreSQL, else
postgres://postgres@127.0.0.1:5432/; a throw-away database is created and dropped. Without a
server it says so and exits 0. Prints its figures (var/bench/usage.figures.json).
"""

import argparse
import os
import random
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from bench.common import figure, write_figures, write_skipped

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "var" / "bench"
HEADER = "timestamp,cluster,namespace,resource,allocated,utilization,pending,wait_seconds\n"
START = datetime(2025, 1, 1, tzinfo=UTC)


def _server_url() -> str:
    for name in ("BENCH_DATABASE_URL", "DATABASE_URL"):
        url = os.environ.get(name, "")
        if url.startswith(("postgres://", "postgresql://")):
            return url
    return "postgres://postgres@127.0.0.1:5432/postgres"


def _with_db(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


def _admin_connection(url: str):
    import psycopg

    return psycopg.connect(_with_db(url, "postgres"), autocommit=True, connect_timeout=5)


def _setup_django(db_url: str) -> None:
    os.environ["DATABASE_URL"] = db_url
    for name in ("CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"):
        os.environ.pop(name, None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _make_namespaces(namespaces: int) -> None:
    from decimal import Decimal

    from quotas.models import Cluster, ClusterCapacity, Resource, Team, TeamNamespace
    from quotas.services import allocation_set

    gpu, _ = Resource.objects.get_or_create(
        name="nvidia.com/gpu", defaults={"display_name": "GPU", "kind": "gpu"}
    )
    cluster = Cluster.objects.create(name="bench")
    ClusterCapacity.objects.create(cluster=cluster, resource=gpu, capacity=Decimal(namespaces * 8))
    for i in range(namespaces):
        team = Team.objects.create(slug=f"team-{i:04d}", name=f"Team {i}")
        ns = TeamNamespace.objects.create(team=team, cluster=cluster, name=f"team-{i:04d}")
        allocation_set(team_namespace=ns, resource=gpu, guarantee=2, cap=6, acting_user=None)


def _write_csv(path: Path, days: int, namespaces: int) -> int:
    rng = random.Random(1)
    rows = 0
    with path.open("w") as f:
        f.write(HEADER)
        for step in range(days * 288):
            when = (START + timedelta(minutes=5 * step)).isoformat()
            lines = []
            for i in range(namespaces):
                allocated = rng.randint(0, 8)
                pending = rng.choice((0, 0, 0, 1, 2))
                wait = rng.randint(1, 3600) if pending else ""
                lines.append(
                    f"{when},bench,team-{i:04d},nvidia.com/gpu,{allocated},"
                    f"{rng.randint(0, 100)},{pending},{wait}\n"
                )
            f.write("".join(lines))
            rows += namespaces
    return rows


def _copy_baseline(path: Path) -> float:
    """Plain COPY of the same file into a table of the same columns."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE bench_copy (timestamp timestamptz, cluster text, namespace text, "
            "resource text, allocated numeric, utilization numeric, pending numeric, "
            "wait_seconds integer)"
        )
        started = time.perf_counter()
        with (
            path.open("rb") as f,
            cursor.cursor.copy("COPY bench_copy FROM STDIN WITH (FORMAT csv, HEADER true)") as copy,
        ):
            while block := f.read(1 << 20):
                copy.write(block)
        elapsed = time.perf_counter() - started
        cursor.execute("DROP TABLE bench_copy")
    return elapsed


SAMPLE_COLUMNS = (
    'team_namespace_id, resource_id, "timestamp", allocated, utilization, pending, '
    "pending_pods, wait_seconds, evictions, source"
)


def _write_floor(out_dir: Path) -> float:
    """What writing the imported samples alone costs, the part of an import no check or
    conversion can take away: the rows as the import stored them, typed and in the key's
    order, COPYed (binary) into an empty table of the samples' shape with its key and time
    indexes. Measured on the rows the import wrote, after it."""
    from django.db import connection

    dump = out_dir / "usage-floor.bin"
    try:
        with connection.cursor() as cursor:
            with (
                dump.open("wb") as f,
                cursor.cursor.copy(
                    f"COPY (SELECT {SAMPLE_COLUMNS} FROM quotas_usagesample "  # noqa: S608
                    'ORDER BY team_namespace_id, resource_id, "timestamp", source) '
                    "TO STDOUT (FORMAT binary)"
                ) as copy,
            ):
                for block in copy:
                    f.write(block)
            cursor.execute(
                "CREATE TABLE bench_floor (LIKE quotas_usagesample INCLUDING DEFAULTS "
                "INCLUDING CONSTRAINTS INCLUDING IDENTITY)"
            )
            cursor.execute(
                "ALTER TABLE bench_floor ADD PRIMARY KEY "
                '(team_namespace_id, resource_id, "timestamp", source)'
            )
            cursor.execute('CREATE INDEX ON bench_floor USING brin ("timestamp")')
            cursor.execute("CHECKPOINT")
            started = time.perf_counter()
            with (
                dump.open("rb") as f,
                cursor.cursor.copy(
                    f"COPY bench_floor ({SAMPLE_COLUMNS}) FROM STDIN (FORMAT binary)"
                ) as copy,
            ):
                while block := f.read(1 << 20):
                    copy.write(block)
            elapsed = time.perf_counter() - started
            cursor.execute("DROP TABLE bench_floor")
    finally:
        dump.unlink(missing_ok=True)
    return elapsed


def _run_measured(argv: list[str], env: dict) -> tuple[float, float]:
    """Run a command to the end: its wall time and its own peak resident memory (MiB)."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, argv)
    return elapsed, usage.ru_maxrss / 1024


def _import(path: Path, db_url: str) -> tuple[float, float, float]:
    """import_usage in its own process: wall time and its peak resident memory (MiB), and the
    peak of the same command doing nothing (Django loaded, no file) as the memory baseline."""
    env = {**os.environ, "DATABASE_URL": db_url, "DJANGO_SETTINGS_MODULE": "portal.settings"}
    manage = [sys.executable, str(ROOT / "manage.py")]
    _, idle_mib = _run_measured([*manage, "import_usage", "--help"], env)
    elapsed, peak_mib = _run_measured([*manage, "import_usage", str(path), "--no-rollup"], env)
    return elapsed, peak_mib, idle_mib


HAND_AGGREGATE = """
SELECT team_namespace_id, resource_id, ("timestamp" AT TIME ZONE 'UTC')::date,
       count(*), max(allocated), percentile_cont(0.95) WITHIN GROUP (ORDER BY allocated),
       avg(allocated), avg(utilization), max(pending), max(wait_seconds), sum(evictions)
FROM quotas_usagesample
GROUP BY 1, 2, 3
"""


def _rollup(days: int) -> tuple[float, float, int]:
    from django.db import connection

    from usage.rollup import usage_rollup

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE quotas_usagesample")
        started = time.perf_counter()
        cursor.execute(HAND_AGGREGATE)
        hand_rows = len(cursor.fetchall())
        hand = time.perf_counter() - started
    started = time.perf_counter()
    result = usage_rollup(start=START.date(), end=(START + timedelta(days=days - 1)).date())
    ours = time.perf_counter() - started
    assert result.days == hand_rows, (result.days, hand_rows)
    return ours, hand, result.days


def _best(fn, repeat: int = 5) -> float:
    """The fastest of ``repeat`` runs (after one to warm the caches)."""
    fn()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


NAMESPACE_MONTH = """
SELECT "timestamp", allocated, pending, utilization, source FROM quotas_usagesample
WHERE team_namespace_id = %s AND resource_id = %s AND "timestamp" >= %s AND "timestamp" < %s
ORDER BY "timestamp"
"""
CHART_AGGREGATE = """
SELECT c.name, r.name, r.unit, d.day, sum(d.peak), sum(d.mean)
FROM quotas_usagedaily d
JOIN quotas_teamnamespace tn ON tn.id = d.team_namespace_id
JOIN quotas_cluster c ON c.id = tn.cluster_id
JOIN quotas_resource r ON r.id = d.resource_id
WHERE tn.team_id = %s AND d.day >= %s AND d.day <= %s
GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 4
"""


def _reads(days: int) -> dict:
    """A namespace's last month of samples (the ORM's rows, as the what-if reads them)
    against one plain SQL statement; the dashboard's usage chart of a team (30 days) against
    one hand-written aggregate; the samples' size on disk."""
    from django.db import connection

    from overview.selectors import team_usage_series
    from quotas.models import Resource, TeamNamespace
    from usage.models import UsageSample
    from usage.partitions import partitioned, partitions

    ns = TeamNamespace.objects.order_by("name")[len(TeamNamespace.objects.all()) // 2]
    gpu = Resource.objects.get(name="nvidia.com/gpu")
    last = START + timedelta(days=days)
    first = max(START, last - timedelta(days=30))
    columns = ("timestamp", "allocated", "pending", "utilization", "source")

    def orm_month():
        rows = UsageSample.objects.filter(
            team_namespace=ns, resource=gpu, timestamp__gte=first, timestamp__lt=last
        ).order_by("timestamp")
        return list(rows.values_list(*columns))

    def sql_month():
        with connection.cursor() as cursor:
            cursor.execute(NAMESPACE_MONTH, [ns.pk, gpu.pk, first, last])
            return cursor.fetchall()

    month_rows = len(orm_month())
    assert month_rows == len(sql_month())
    chart_end = last.date() - timedelta(days=1)
    chart_start = chart_end - timedelta(days=29)

    def chart():
        return team_usage_series(team_ids=[ns.team_id], start=chart_start, end=chart_end)

    def chart_sql():
        with connection.cursor() as cursor:
            cursor.execute(CHART_AGGREGATE, [ns.team_id, chart_start, chart_end])
            return cursor.fetchall()

    assert sum(len(s.days) for s in chart()) == len(chart_sql())
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), pg_total_relation_size('quotas_usagesample') FROM quotas_usagesample"
        )
        rows, size = cursor.fetchone()
    if partitioned():
        size = sum(p.bytes for p in partitions())
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_total_relation_size('quotas_usagesample_default')")
            size += cursor.fetchone()[0]
    return {
        "namespace_month_rows": month_rows,
        # In milliseconds: a few of them, which seconds to four places would round off.
        "namespace_month_ms": _best(orm_month) * 1000,
        "namespace_month_sql_ms": _best(sql_month) * 1000,
        "chart_ms": _best(chart) * 1000,
        "chart_sql_ms": _best(chart_sql) * 1000,
        "partitions": len(partitions()),
        "samples_mib_per_million": round(size / (1 << 20) / max(rows, 1) * 1e6, 1),
    }


def main() -> int:
    quick = os.environ.get("BENCH_QUICK") == "1"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=2 if quick else 105)
    parser.add_argument("--namespaces", type=int, default=50 if quick else 1000)
    parser.add_argument("--showback-days", type=int, default=62 if quick else 365)
    args = parser.parse_args()

    server = _server_url()
    try:
        admin = _admin_connection(server)
    except Exception as exc:  # no server: nothing to measure, say so
        write_skipped("usage", f"no PostgreSQL at {urlsplit(server).hostname} ({exc})")
        return 0
    db_name = f"bench_usage_{os.getpid()}"
    admin.execute(f'CREATE DATABASE "{db_name}"')
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUT_DIR / f"usage-{args.days}d-{args.namespaces}ns.csv"
    try:
        db_url = _with_db(server, db_name)
        _setup_django(db_url)
        _make_namespaces(args.namespaces)
        started = time.perf_counter()
        rows = _write_csv(path, args.days, args.namespaces)
        generate = time.perf_counter() - started
        size_mib = path.stat().st_size / (1 << 20)
        copy_s = _copy_baseline(path)
        import_s, import_peak_mib, idle_mib = _import(path, db_url)
        floor_s = _write_floor(OUT_DIR)
        rollup_s, hand_s, rollup_rows = _rollup(args.days)
        reads = _reads(args.days)
        from bench.bench_suggest import bench_suggestions

        suggest = bench_suggestions(start=START.date(), days=min(args.days, 31))
        from bench.bench_showback import bench_showback

        showback = bench_showback(before=START.date(), days=args.showback_days)
        from django.db import connections

        connections.close_all()
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        admin.close()
        path.unlink(missing_ok=True)

    results = {
        "quick": quick,
        "days": args.days,
        "namespaces": args.namespaces,
        "rows": rows,
        "file_mib": round(size_mib, 2),
        "generate_seconds": round(generate, 4),
        "copy_seconds": round(copy_s, 4),
        "import_seconds": round(import_s, 4),
        "import_vs_copy": round(import_s / copy_s, 4),
        "write_floor_seconds": round(floor_s, 4),
        "write_floor_vs_copy": round(floor_s / copy_s, 4),
        "import_rows_per_second": round(rows / import_s),
        "import_peak_rss_mib": round(import_peak_mib, 1),
        "import_peak_rss_vs_file": round(import_peak_mib / size_mib, 3),
        "idle_command_peak_rss_mib": round(idle_mib, 1),
        "rollup_rows": rollup_rows,
        "hand_aggregate_seconds": round(hand_s, 4),
        "rollup_seconds": round(rollup_s, 4),
        "rollup_vs_hand_aggregate": round(rollup_s / hand_s, 4),
        **reads,
        **suggest,
        **showback,
    }
    write_figures("usage", usage_figures(results), results)
    return 0


def usage_figures(results: dict) -> list[dict]:
    size = f"{results['days']} d x {results['namespaces']:,} ns, {results['rows']:,} rows"
    pg = "postgresql"
    return [
        figure(
            f"usage import ({size})",
            results["import_seconds"],
            "s",
            baseline=results["copy_seconds"],
            baseline_label="plain COPY of the file",
            database=pg,
            note=f"{results['import_rows_per_second']:,} rows/s",
        ),
        figure(
            "usage import: writing the samples alone",
            results["write_floor_seconds"],
            "s",
            baseline=results["copy_seconds"],
            baseline_label="plain COPY of the file",
            database=pg,
            note="the imported rows, typed and in key order, COPYed (binary) into an empty "
            "table of the samples' shape: the part no check or conversion can take away",
        ),
        figure(
            "usage import peak memory",
            results["import_peak_rss_mib"],
            "MiB",
            baseline=results["idle_command_peak_rss_mib"],
            baseline_label="the same command idle",
            database=pg,
            note=f"the CSV file: {results['file_mib']:,} MiB",
        ),
        figure(
            f"usage daily rollup ({results['rollup_rows']:,} rows)",
            results["rollup_seconds"],
            "s",
            baseline=results["hand_aggregate_seconds"],
            baseline_label="one hand-written SQL aggregate",
            database=pg,
        ),
        figure(
            f"a namespace's month of samples ({results['namespace_month_rows']:,} rows,"
            f" of {results['rows']:,})",
            results["namespace_month_ms"],
            "ms",
            baseline=results["namespace_month_sql_ms"],
            baseline_label="the same rows by one plain SQL statement",
            database=pg,
        ),
        figure(
            "dashboard usage chart of a team (30 days of rollups)",
            results["chart_ms"],
            "ms",
            baseline=results["chart_sql_ms"],
            baseline_label="one hand-written SQL aggregate",
            database=pg,
        ),
        figure(
            f"samples on disk ({results['partitions']} month partitions)",
            results["samples_mib_per_million"],
            "MiB per million samples",
            database=pg,
            note="table and indexes",
        ),
        figure(
            f"suggestions ({results['suggestions']:,} namespaces, a month of 5-minute samples)",
            results["suggest_seconds"],
            "s",
            baseline=results["suggest_read_once_seconds"],
            baseline_label="reading the same samples once (one grouped scan)",
            database=pg,
        ),
        figure(
            f"showback ({results['showback_months']} months x {results['namespaces']:,} teams,"
            f" {results['showback_rollup_rows']:,} rollups)",
            results["showback_seconds"],
            "s",
            baseline=results["showback_hand_aggregate_seconds"],
            baseline_label="one hand-written SQL aggregate",
            database=pg,
        ),
    ]


if __name__ == "__main__":
    sys.exit(main())
