"""The suggestion step of ``bench/bench_usage.py`` (``make bench``): ``suggestions_compute`` for
every namespace of the bench cluster over the rolled-up month, against one hand-written SQL
aggregate of the same figures over the same rollup table, in the same run (the aggregate only
reads; the service also applies the rules, scales guarantees and writes one row per namespace).

Alone, ``python -m bench.bench_suggest [--namespaces 1000 --days 30]`` writes synthetic daily
rollups straight away (no raw samples, no import) into a throw-away PostgreSQL database and
times only this step; it prints the figures and writes var/bench/suggest.json.
"""

import argparse
import json
import os
import random
import sys
import time
from datetime import date, timedelta

HAND_AGGREGATE = """
SELECT team_namespace_id, resource_id, count(*),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY peak), max(peak + pending_peak),
       avg(mean), avg(p95), sum(gpu_hours), sum(borrowed_gpu_hours),
       sum(idle_guaranteed_gpu_hours), max(pending_wait_seconds), sum(evictions)
FROM quotas_usagedaily
WHERE day BETWEEN %s AND %s
GROUP BY 1, 2
"""


def bench_suggestions(*, start: date, days: int, cluster: str = "bench") -> dict:
    from django.db import connection

    from quotas.models import Cluster
    from usage.suggestions import suggestions_compute

    end = start + timedelta(days=days - 1)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE quotas_usagedaily")
        started = time.perf_counter()
        cursor.execute(HAND_AGGREGATE, [start, end])
        hand_rows = len(cursor.fetchall())
        hand = time.perf_counter() - started
    started = time.perf_counter()
    stored = suggestions_compute(
        cluster=Cluster.objects.get(name=cluster),
        month=start.replace(day=1),
        today=end + timedelta(days=1),
    )
    ours = time.perf_counter() - started
    assert stored == hand_rows, (stored, hand_rows)
    return {
        "suggestions": stored,
        "suggest_hand_aggregate_seconds": round(hand, 4),
        "suggest_seconds": round(ours, 4),
        "suggest_vs_hand_aggregate": round(ours / hand, 4),
    }


def make_rollups(days: int, start: date) -> int:
    """``days`` of synthetic rollups from ``start`` for every bench namespace."""
    from decimal import Decimal

    from quotas.models import TeamNamespace
    from usage.models import UsageDaily

    rng = random.Random(1)
    rows = []
    for ns in TeamNamespace.objects.filter(cluster__name="bench").order_by("name"):
        base = rng.randint(0, 6)
        resource_id = ns.allocations.get().resource_id
        for i in range(days):
            peak = Decimal(base + rng.randint(0, 4))
            rows.append(
                UsageDaily(
                    team_namespace=ns,
                    resource_id=resource_id,
                    day=start + timedelta(days=i),
                    source="csv",
                    samples=288,
                    peak=peak,
                    p95=peak,
                    mean=peak / 2,
                    gpu_hours=peak * 12,
                    borrowed_gpu_hours=Decimal(0),
                    idle_guaranteed_gpu_hours=Decimal(0),
                    pending_peak=Decimal(rng.choice((0, 0, 1))),
                )
            )
    UsageDaily.objects.bulk_create(rows, batch_size=5000)
    return len(rows)


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
        rollups = make_rollups(min(args.days, 31), START.date())
        results = {
            "namespaces": args.namespaces,
            "rollup_rows": rollups,
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
