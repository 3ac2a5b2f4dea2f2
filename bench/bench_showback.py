"""The showback step of ``bench/bench_usage.py`` (``make bench``): ``usage.showback.showback``
for a platform admin over a year of daily rollups of every bench namespace (one team each),
against one hand-written SQL aggregate of the same sums per month and team over the same table,
in the same run (the aggregate only sums; the service also counts the units in GPUs, prices them
and builds the rows of every month, the totals included).

The year of rollups is written before the usage bench's own days (bulk inserts, no import), so
the two never meet.
"""

import random
import time
from datetime import date, timedelta

HAND_AGGREGATE = """
SELECT date_trunc('month', d.day), ns.team_id, sum(d.gpu_hours), sum(d.borrowed_gpu_hours),
       sum(d.idle_guaranteed_gpu_hours)
FROM quotas_usagedaily d JOIN quotas_teamnamespace ns ON ns.id = d.team_namespace_id
WHERE d.day BETWEEN %s AND %s
GROUP BY 1, 2
"""


def _first_of_month(day: date) -> date:
    return day.replace(day=1)


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


def bench_showback(*, before: date, days: int) -> dict:
    """Writes ``days`` of rollups per bench namespace ending the day before ``before``, then
    times the showback of their months against the hand aggregate."""
    from django.contrib.auth.models import User
    from django.db import connection

    from quotas.roles import ensure_role_groups
    from usage.showback import ShowbackPeriod, showback

    start = before - timedelta(days=days)
    rows = make_rollups(days, start)
    end = before - timedelta(days=1)
    admins, _ = ensure_role_groups()
    admin = User.objects.create_user("bench-showback-admin")
    admin.groups.add(admins)
    period = ShowbackPeriod(start=_first_of_month(start), end=_first_of_month(end))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE quotas_usagedaily")
        started = time.perf_counter()
        cursor.execute(HAND_AGGREGATE, [period.start, period.last_day])
        hand_rows = len(cursor.fetchall())
        hand = time.perf_counter() - started
    started = time.perf_counter()
    result = showback(user=admin, period=period)
    ours = time.perf_counter() - started
    team_rows = len(result.teams)
    assert team_rows == hand_rows, (team_rows, hand_rows)
    return {
        "showback_rollup_rows": rows,
        "showback_months": len(period.months),
        "showback_team_months": team_rows,
        "showback_hand_aggregate_seconds": round(hand, 4),
        "showback_seconds": round(ours, 4),
        "showback_vs_hand_aggregate": round(ours / hand, 4),
    }
