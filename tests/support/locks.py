"""The lock order read from the SQL PostgreSQL runs: which tables a statement locks, and a
check that a change locks them in portal.locks.LOCK_ORDER."""

import os
import re

import pytest
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.locks import LOCK_ORDER

RANK = {apps.get_model(label)._meta.db_table: rank for rank, label in enumerate(LOCK_ORDER)}
LOCKING = re.compile(r'^\s*(?:UPDATE|DELETE FROM) "(\w+)"')


def _locked_tables(sql: str) -> list[str]:
    """The tables whose rows a statement locks: SELECT ... FOR [NO KEY] UPDATE (OF the tables
    named, or every table it reads), or UPDATE / DELETE of a table in the order."""
    if sql.lstrip().startswith("SELECT") and re.search(r" FOR (NO KEY )?UPDATE", sql):
        of = re.search(r" FOR (?:NO KEY )?UPDATE OF (.*)$", sql)
        named = of.group(1) if of else " ".join(re.findall(r'(?:FROM|JOIN) "\w+"', sql))
        return re.findall(r'"(\w+)"', named)
    match = LOCKING.match(sql)
    return [match.group(1)] if match and match.group(1) in RANK else []


def require_postgresql(message: str) -> None:
    """Skip on another database (SQLite has no row locks: FOR UPDATE is left out of its SQL);
    in CI, where PostgreSQL always runs, fail instead."""
    if connection.vendor != "postgresql":
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def assert_in_lock_order(queries) -> list[str]:
    """No statement locks a table ranked before one locked earlier (rows of a table already
    locked may be locked again); returns the tables in the order first locked."""
    require_postgresql("the lock order is read from the SQL PostgreSQL runs")
    first: list[str] = []
    highest = -1
    for query in queries:
        tables = _locked_tables(query["sql"])
        unknown = [t for t in tables if t not in RANK]
        assert unknown == [], f"locks rows of {unknown}, not in LOCK_ORDER: {query['sql']}"
        new = [t for t in tables if t not in first]
        for table in new:
            assert RANK[table] >= highest, f"{table} locked after {first}: {query['sql']}"
        first += new
        highest = max([highest, *(RANK[t] for t in tables)])
    return first


def locks_of(change) -> list[str]:
    with CaptureQueriesContext(connection) as ctx:
        change()
    return assert_in_lock_order(ctx.captured_queries)


def lock_waiters() -> int:
    """PostgreSQL: how many sessions of this test database wait for a lock right now (read
    from a fresh snapshot of pg_stat_activity; other databases, e.g. other xdist workers', are
    not counted)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]
