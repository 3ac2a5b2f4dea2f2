"""The usage samples' monthly partitions on PostgreSQL.

``quotas_usagesample`` is partitioned by range of ``timestamp``: one partition per calendar
month in UTC (``quotas_usagesample_p2025_01`` holds [2025-01-01, 2025-02-01) UTC) and a
default partition for any instant no month partition covers yet. Months are made ahead by the
beat (``usage.ensure_sample_partitions``: from last month to PARTITION_MONTHS_AHEAD ahead) and
by the import for the months of its file, so samples land in their month; a month made after
some of its samples went to the default partition takes them over. Where the portal's database
role may not make tables (the owner role runs the migrations), nothing fails: the samples go to
the default partition, a warning names the months, and the owner makes them with ``python
manage.py ensure_sample_partitions``. A day's rollup reads its
month's partition (PostgreSQL prunes the others from the plan), and retention drops whole
months instead of deleting rows.

On SQLite the samples are one table: every function here does nothing there.
"""

# ruff: noqa: S608 - the statements are built from this module's table names and month bounds,
# never from input.

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime

import psycopg
from django.db import DatabaseError, connection, transaction

log = logging.getLogger(__name__)

TABLE = "quotas_usagesample"
DEFAULT = f"{TABLE}_default"
PARTITION_MONTHS_AHEAD = 3
# Taken (for the transaction) by whoever makes or drops a partition: two workers making the
# same month wait for each other instead of failing.
_LOCK_KEY = 0x75736167  # "usag"
_NAME = re.compile(rf"^{TABLE}_p(\d{{4}})_(\d{{2}})$")


def partitioned() -> bool:
    """Whether the samples table is partitioned here (PostgreSQL, after usage 0005)."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [TABLE])
        row = cursor.fetchone()
    return row is not None and row[0] == "p"


def month_start(moment: date | datetime) -> date:
    """The first day of the UTC month of ``moment`` (a date is taken as it is)."""
    if isinstance(moment, datetime):
        moment = moment.astimezone(UTC).date()
    return moment.replace(day=1)


def next_month(month: date) -> date:
    return date(month.year + month.month // 12, month.month % 12 + 1, 1)


def partition_name(month: date) -> str:
    return f"{TABLE}_p{month.year:04d}_{month.month:02d}"


def _bounds(month: date) -> tuple[datetime, datetime]:
    lo = datetime(month.year, month.month, 1, tzinfo=UTC)
    nxt = next_month(month)
    return lo, datetime(nxt.year, nxt.month, 1, tzinfo=UTC)


def _range(month: date) -> str:
    """The partition bound of a month, as literals (DDL takes no parameters)."""
    lo, hi = _bounds(month)
    return f"FOR VALUES FROM ('{lo.isoformat()}') TO ('{hi.isoformat()}')"


@dataclass(frozen=True)
class Partition:
    name: str
    month: date
    rows_estimate: int
    bytes: int  # table and its indexes on disk


def partitions() -> list[Partition]:
    """The month partitions, oldest first (not the default one); empty on SQLite."""
    if not partitioned():
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname, c.reltuples::bigint, pg_total_relation_size(c.oid)
            FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = %s::regclass
            """,
            [TABLE],
        )
        rows = cursor.fetchall()
    found = []
    for name, tuples, size in rows:
        if m := _NAME.match(name):
            month = date(int(m[1]), int(m[2]), 1)
            found.append(Partition(name, month, max(tuples, 0), size))
    return sorted(found, key=lambda p: p.month)


def _months(first: date, last: date) -> list[date]:
    months, month, end = [], month_start(first), month_start(last)
    while month <= end:
        months.append(month)
        month = next_month(month)
    return months


def missing_months(first: date, last: date) -> list[date]:
    """The months from ``first``'s to ``last``'s without their partition (none on SQLite)."""
    if not partitioned():
        return []
    return sorted(set(_months(first, last)) - {p.month for p in partitions()})


def ensure_months(first: date, last: date) -> list[str]:
    """Make the month partitions from ``first``'s month to ``last``'s that do not exist yet;
    samples of such a month already in the default partition move into it. Returns the names
    made. Idempotent, and safe against another worker doing the same."""
    if not partitioned():
        return []
    wanted = _months(first, last)
    # Most calls (every Prometheus reading) find their months there: no lock, no transaction.
    if not set(wanted) - {p.month for p in partitions()}:
        return []
    made = []
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK_KEY])
            existing = {p.month for p in partitions()}
            for month in wanted:
                if month not in existing:
                    _make(cursor, month)
                    made.append(partition_name(month))
    except DatabaseError as exc:
        if not isinstance(exc.__cause__, psycopg.errors.InsufficientPrivilege):
            raise
        # An application role that may not make tables (the owner runs the migrations): the
        # samples still land, in the default partition, and move into their month once the
        # owner makes it.
        missing = missing_months(wanted[0], wanted[-1])
        log.warning(
            "usage samples: this database role may not make the month partitions %s (%s); "
            "their samples go to the default partition until the table's owner makes them: "
            "python manage.py ensure_sample_partitions --from %s, as the owner role",
            ", ".join(partition_name(m) for m in missing),
            str(exc).strip().splitlines()[0],
            (missing or wanted)[0].strftime("%Y-%m"),
        )
        return []
    return made


def _make(cursor, month: date) -> None:
    name = partition_name(month)
    lo, hi = _bounds(month)
    cursor.execute(
        f'SELECT EXISTS (SELECT 1 FROM {DEFAULT} WHERE "timestamp" >= %s AND "timestamp" < %s)',
        [lo, hi],
    )
    if not cursor.fetchone()[0]:
        cursor.execute(f"CREATE TABLE {name} PARTITION OF {TABLE} {_range(month)}")
        return
    # The month's samples that came before it: moved from the default partition into a table
    # of the same shape, which then becomes the month (its indexes built once, not per row).
    cursor.execute(f"CREATE TABLE {name} (LIKE {TABLE} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)")
    cursor.execute(
        f"""
        WITH moved AS (
            DELETE FROM {DEFAULT} WHERE "timestamp" >= %s AND "timestamp" < %s RETURNING *
        )
        INSERT INTO {name} SELECT * FROM moved
        """,
        [lo, hi],
    )
    cursor.execute(f"ALTER TABLE {TABLE} ATTACH PARTITION {name} {_range(month)}")


def kept_months(
    *, today: date, months_ahead: int = PARTITION_MONTHS_AHEAD, since: date | None = None
) -> tuple[date, date]:
    """The first and the last month the beat keeps: last month (or ``since``'s month, when
    earlier) to ``months_ahead`` months after this one."""
    this = month_start(today)
    first = month_start(date.fromordinal(this.toordinal() - 1))
    if since is not None:
        first = min(first, month_start(since))
    last = this
    for _ in range(months_ahead):
        last = next_month(last)
    return first, last


def ensure_ahead(
    *, today: date, months_ahead: int = PARTITION_MONTHS_AHEAD, since: date | None = None
) -> list[str]:
    """The beat's call: the partitions of the :func:`kept_months`."""
    return ensure_months(*kept_months(today=today, months_ahead=months_ahead, since=since))


def drop_before(cutoff: datetime) -> int:
    """Retention, a month at a time: drop the month partitions that end at or before
    ``cutoff`` (every sample in them is older), and delete the default partition's samples
    older than it. The month ``cutoff`` falls in stays whole. Returns how many samples went."""
    gone = 0
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK_KEY])
            for part in partitions():
                if _bounds(part.month)[1] <= cutoff:
                    cursor.execute(f"SELECT count(*) FROM {part.name}")
                    gone += cursor.fetchone()[0]
                    cursor.execute(f"DROP TABLE {part.name}")
            cursor.execute(f'DELETE FROM {DEFAULT} WHERE "timestamp" < %s', [cutoff])
            gone += cursor.rowcount
    except DatabaseError as exc:
        if not isinstance(exc.__cause__, psycopg.errors.InsufficientPrivilege):
            raise
        # A role that may not drop the months (the owner's tables): the samples past the
        # retention are deleted through the samples table instead, whole days as elsewhere.
        log.warning(
            "usage samples: this database role may not drop month partitions (%s); deleting "
            "the samples before %s row by row instead",
            str(exc).strip().splitlines()[0],
            cutoff.isoformat(),
        )
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f'DELETE FROM {TABLE} WHERE "timestamp" < %s', [cutoff])
            return cursor.rowcount
    return gone
