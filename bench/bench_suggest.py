"""The suggestion step of ``bench/bench_usage.py`` (``make bench``): ``suggestions_compute`` for
every namespace of the bench cluster over a month of 5-minute samples and their daily rollups,
against reading the same samples once (one grouped scan of the month's samples, as plain SQL),
in the same run. The service reads each day's demand counts from the rollups (the rollup counts
the samples by demand as it scans them), forecasts, prices, chooses every guarantee together and
writes one row per namespace.

Alone, ``python -m bench.bench_suggest [--namespaces 1000 --days 30]`` writes synthetic
5-minute samples with SQL straight away (no CSV, no import), rolls them up, and times only this
step in a throw-away PostgreSQL database; it prints the figures and writes var/bench/suggest.json.
"""

import argparse
import json
import os
import sys
import time
from datetime import date, timedelta

READ_ONCE = """
SELECT team_namespace_id, resource_id, count(*), sum(allocated + pending)
FROM quotas_usagesample
WHERE timestamp >= %s AND timestamp < %s
GROUP BY 1, 2
"""


def bench_suggestions(*, start: date, days: int, cluster: str = "bench") -> dict:
    from datetime import UTC, datetime

    from django.db import connection

    from quotas.models import Cluster
    from usage.suggestions import suggestions_compute

    end = start + timedelta(days=days - 1)
    lo = datetime.combine(start, datetime.min.time(), tzinfo=UTC)
    hi = lo + timedelta(days=days)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE quotas_usagesample")
        started = time.perf_counter()
        cursor.execute(READ_ONCE, [lo, hi])
        read_rows = len(cursor.fetchall())
        read_once = time.perf_counter() - started
    started = time.perf_counter()
    stored = suggestions_compute(
        cluster=Cluster.objects.get(name=cluster),
        month=start.replace(day=1),
        today=end + timedelta(days=1),
    )
    ours = time.perf_counter() - started
    assert stored == read_rows, (stored, read_rows)
    return {
        "suggestions": stored,
        "suggest_read_once_seconds": round(read_once, 4),
        "suggest_seconds": round(ours, 4),
        "suggest_vs_read_once": round(ours / read_once, 4),
    }


MAKE_SAMPLES = """
INSERT INTO quotas_usagesample
    (team_namespace_id, resource_id, timestamp, allocated, pending, pending_pods, evictions,
     source)
SELECT a.team_namespace_id, a.resource_id, t,
       -- a base of 0-6 per namespace, a daily wave and noise; a burst on some afternoons
       floor(b.base + 2 * (1 + sin(extract(epoch FROM t) / 86400 * 2 * pi())) + random() * 2
             + CASE WHEN extract(hour FROM t) BETWEEN 14 AND 15 AND b.bursty THEN 4 ELSE 0 END),
       CASE WHEN random() < 0.05 THEN 1 ELSE 0 END, 0, 0, 'csv'
FROM quotas_allocation a
JOIN quotas_teamnamespace tn ON tn.id = a.team_namespace_id
JOIN quotas_cluster c ON c.id = tn.cluster_id AND c.name = 'bench'
CROSS JOIN LATERAL (SELECT (a.team_namespace_id * 7919) %% 7 AS base,
                           (a.team_namespace_id %% 3) = 0 AS bursty) b
CROSS JOIN generate_series(%s::timestamptz, %s::timestamptz - interval '5 minutes',
                           interval '5 minutes') AS t
"""


def make_samples(days: int, start: date) -> int:
    """``days`` of synthetic 5-minute samples from ``start`` for every bench namespace, made
    by the database, then rolled up."""
    from datetime import UTC, datetime

    from django.db import connection

    from usage.rollup import usage_rollup

    lo = datetime.combine(start, datetime.min.time(), tzinfo=UTC)
    with connection.cursor() as cursor:
        cursor.execute("SELECT setseed(0.1)")
        cursor.execute(MAKE_SAMPLES, [lo, lo + timedelta(days=days)])
        rows = cursor.rowcount
    started = time.perf_counter()
    usage_rollup(start=start, end=start + timedelta(days=days - 1))
    print(f"rollup of the month: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return rows


def main() -> int:
    from bench.bench_usage import (
        OUT_DIR,
        START,
        _admin_connection,
        _make_namespaces,
        _server_url,
        _setup_django,
        _with_db,
    )

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespaces", type=int, default=1000)
    parser.add_argument("--days", type=int, default=30)
    args = parser.parse_args()
    server = _server_url()
    try:
        admin = _admin_connection(server)
    except Exception as exc:  # no server: nothing to measure, say so
        print(f"bench_suggest: no PostgreSQL ({exc}); skipped")
        return 0
    db_name = f"bench_suggest_{os.getpid()}"
    admin.execute(f'CREATE DATABASE "{db_name}"')
    try:
        _setup_django(_with_db(server, db_name))
        _make_namespaces(args.namespaces)
        samples = make_samples(min(args.days, 31), START.date())
        results = {
            "namespaces": args.namespaces,
            "samples": samples,
            **bench_suggestions(start=START.date(), days=min(args.days, 31)),
        }
        from django.db import connections

        connections.close_all()
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        admin.close()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    out = OUT_DIR / "suggest.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    for key, value in results.items():
        print(f"{key:<32}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
