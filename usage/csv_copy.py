"""The usage import on PostgreSQL: the file COPYed as it is into a staging table of text
columns, the rows checked and converted in SQL into a second table, and one write into the
samples: a plain INSERT when a thousand of the file's rows, looked up by the samples' key, are
all new (a first import, most are; ON CONFLICT cost a quarter of the import), else, or when
that insert meets a stored sample after all, an upsert.

The checks and conversions are most of the work, and they run in parallel: the staging table is
an unlogged table of the import's own (``usage_import_raw_<backend pid>``), which PostgreSQL's
parallel workers may read (a temporary one they may not), and the converted rows are made by a
``CREATE TABLE AS``, which may use them (an ``INSERT`` may not). On two cores this took a
first import of 8.64 M rows from 87 s to 71 s. A staging table left by an import that died with
its connection is dropped by the next import. When the timestamp is the first column, the
lines are read for their months and their timestamps' form as they stream to COPY; a file
whose timestamps are all plain is not checked for them again in SQL (PostgreSQL's regular
expression cost a third of the conversion: on 2.88 M rows, 7.7 s went to 3.9 s).

What the SQL converts it must convert exactly as the row-by-row path (csv_import._parse) would,
so it takes only the plain forms whose meaning is beyond doubt: ``2025-01-01T00:05:00`` (with
``Z`` or ``+hh:mm``; without an offset only when TIME_ZONE has one offset all year round),
amounts of digits and one point, utilization with at most two decimals, wait_seconds of
digits, and cluster, namespace and resource names that exist. Every other row (an error, or a
form such as ``1e3`` or ``+5``) is read back and parsed row by row by csv_import's own rules,
so its error, or its value, is the one the row-by-row path gives. A row beyond the header's
cells, a blank line or a date that does not exist makes the whole file go row by row instead
(the caller reads it again): COPY or the cast refuse it, and no row was written.
"""

# ruff: noqa: S608 - the queries are built from this module's own fragments and the header's
# column positions; no text of the file is ever part of one.
from __future__ import annotations

import contextlib
import csv
import io
import re
from collections.abc import Callable
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import psycopg
from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.transaction import TransactionManagementError
from psycopg.copy import LibpqWriter

from usage.csv_import import (
    OPTIONAL,
    REQUIRED,
    ImportResult,
    RowError,
    _header,
    _Lookups,
    _parse,
    _RowInvalid,
)
from usage.partitions import ensure_months, next_month, partitioned

CHUNK = 1 << 20  # characters handed to COPY at a time
FETCH = 10_000  # rows read back at a time for the row-by-row rules


def _fixed_offset(zone: str) -> bool:
    """Whether the zone has one UTC offset from 1970 to 2050 (no summer time): then a time
    without an offset means the same instant in PostgreSQL as in Python."""
    tz = ZoneInfo(zone)
    start = datetime(1970, 1, 1, tzinfo=tz)
    offsets = {(start + timedelta(days=15 * i)).utcoffset() for i in range(80 * 24 + 1)}
    return len(offsets) == 1


DIGITS = "'0123456789'"


def _optional(c: str, check: str) -> str:
    return f"(CASE WHEN {c} IS NULL OR {c} = '' THEN true ELSE {check} END)"


def _plain_amount(c: str, *, whole: int, decimals: int) -> str:
    """SQL, true where the cell is an amount written plainly: digits, at most one point, at
    most ``whole`` digits before it and ``decimals`` after (1e3, +5, ' 5' or 4.1250 go by the
    rules). Text functions only: PostgreSQL may evaluate an AND's terms in any order, so no
    term may cast."""
    point = f"strpos({c}, '.')"
    return (
        f"(translate({c}, {DIGITS}, '') IN ('', '.') AND {c} <> '.' AND "
        f"(CASE {point} WHEN 0 THEN length({c}) <= {whole} "
        f"ELSE {point} - 1 <= {whole} AND length({c}) - {point} <= {decimals} END))"
    )


def _timestamp_form(naive: bool) -> str:
    """The plain form of a timestamp, a pattern PostgreSQL and Python read alike:
    2025-03-01T00:05:00 (or a space for the T), an optional fraction of 1 to 6 digits (more:
    one rounds, the other cuts), then Z or +hh:mm below 15 hours (without either only when
    ``naive``). Hour 24 and second 60, which PostgreSQL takes and Python refuses, are not
    plain; a day past the month's end passes, fails its cast, and the whole file then goes row
    by row."""
    offset = "(?:Z|[+-](?:0[0-9]|1[0-4]):[0-5][0-9])" + ("?" if naive else "")
    return (
        "[0-9]{4}-[0-9]{2}-[0-9]{2}[T ](?:[01][0-9]|2[0-3]):[0-9]{2}:[0-5][0-9]"
        f"(?:[.][0-9]{{1,6}})?{offset}"
    )


def _plain_timestamp(c: str, naive: bool) -> str:
    """SQL, true where the cell is a timestamp in the plain form."""
    return f"({c} ~ '^{_timestamp_form(naive)}$')"


def _instant(t: str, naive: bool) -> str:
    """SQL: the instant of a plain timestamp; one without an offset is in TIME_ZONE, as row
    by row (the session's own time zone stays as Django set it)."""
    if not naive:
        return f"{t}::timestamptz"
    zone = settings.TIME_ZONE.replace("'", "''")
    return (
        f"(CASE WHEN right({t}, 1) = 'Z' OR substr({t}, length({t}) - 5, 1) IN ('+', '-') "
        f"THEN {t}::timestamptz ELSE {t}::timestamp AT TIME ZONE '{zone}' END)"
    )


class _Refused(Exception):
    """COPY or the SQL cannot take this file: it goes row by row."""


def usage_import_copy(
    *, stream: io.TextIOBase, progress: Callable[[int, int], None] | None
) -> ImportResult | None:
    """The whole file in one transaction, or None (nothing written) when it must go row by
    row. Raises CsvHeaderError as the row-by-row path does."""
    first = stream.readline()
    header = _header(next(csv.reader([first]), None))
    # As csv.DictReader: a name given twice reads the later cell.
    position = {name: i for i, name in enumerate(header)}
    naive = _fixed_offset(settings.TIME_ZONE)
    try:
        with connection.cursor() as cursor:
            raw = _staging_table(cursor)
            try:
                starts = _LineStarts(position, naive)
                with transaction.atomic():
                    rows = _load(cursor, raw, stream, header, first, progress, starts)
                # The months of the file made before the import's transaction: making one
                # locks the samples table until its transaction ends.
                _ensure_months(cursor, raw, position, starts.months)
                with transaction.atomic():
                    return _import(cursor, raw, rows, position, naive, starts.all_plain(rows))
            finally:
                with contextlib.suppress(DatabaseError, TransactionManagementError):
                    cursor.execute(f"DROP TABLE IF EXISTS {raw}")
    except _Refused:
        return None


class _LineStarts:
    """What the file's lines start with, read while the file streams to COPY (the server
    parses it meanwhile), when the timestamp is the first column (else ``months`` is None):

    - ``months``: the months ("2025-03") they start with;
    - ``plain``: how many start with a timestamp in the plain form followed by the cell's end.

    When every row does, the SQL need not check the timestamps again: its regular expression
    was a third of the import's checking (PostgreSQL matches it at about 2 us a row, this
    pattern at a tenth of that, while the server is busy with the COPY)."""

    MONTH = "([0-9]{4}-(?:0[1-9]|1[0-2]))-"

    def __init__(self, position: dict[str, int], naive: bool):
        self.months: set[str] | None = set() if position["timestamp"] == 0 else None
        self.plain = 0
        self._month = re.compile(f"^{self.MONTH}", re.MULTILINE)
        # The month is matched twice (a lookahead), so a row with month 13 is not plain here
        # though the SQL's pattern takes it: the check may only be stricter than the SQL's.
        self._plain = re.compile(f"^(?={self.MONTH}){_timestamp_form(naive)},", re.MULTILINE)
        self._tail = ""

    def feed(self, chunk: str) -> None:
        if self.months is None:
            return
        end = chunk.rfind("\n") + 1
        if not end:
            self._tail += chunk
            return
        block = self._tail + chunk[:end]
        self._tail = chunk[end:]
        found = self._plain.findall(block)
        self.plain += len(found)
        if len(found) < block.count("\n"):
            found = self._month.findall(block)  # also the months of the odd lines
        self.months.update(found)

    def close(self) -> None:
        if self.months is not None and self._tail:
            self.feed("\n")

    def all_plain(self, rows: int) -> bool:
        """Whether each of the ``rows`` rows COPY read starts with a plain timestamp (a row
        is a line: a quoted line break makes the file go row by row)."""
        return self.months is not None and self.plain == rows


STAGING = "usage_import_raw_"


def _staging_table(cursor) -> str:
    """The name of this connection's staging table, after dropping the ones of connections
    that are gone (an import that died with its connection leaves its table behind: an
    unlogged table, unlike a temporary one, outlives its session)."""
    cursor.execute(
        """
        SELECT c.relname FROM pg_class c
        WHERE c.relname LIKE %s AND c.relkind = 'r' AND c.relpersistence = 'u'
            AND c.relnamespace = current_schema()::regnamespace
            AND substr(c.relname, %s) NOT IN (
                SELECT pid::text FROM pg_stat_activity WHERE pid <> pg_backend_pid())
        """,
        [STAGING.replace("_", r"\_") + "%", len(STAGING) + 1],
    )
    for (name,) in cursor.fetchall():
        if name[len(STAGING) :].isdigit():
            # Another role's leftover (or one another import drops first) is left alone.
            with contextlib.suppress(DatabaseError), transaction.atomic():
                cursor.execute(f'DROP TABLE IF EXISTS "{name}"')
    return f"{STAGING}{connection.connection.info.backend_pid}"


def _load(cursor, raw: str, stream, header, first, progress, starts: _LineStarts) -> int:
    """The file COPYed into the staging table ``raw``, a text cell per column: its number of
    rows."""
    raw_columns = [f"c{i}" for i in range(len(header))]
    cursor.execute("DROP TABLE IF EXISTS usage_import_rows, usage_import_plain")
    columns = (
        # Numbered as COPY reads the lines: this connection alone draws from the sequence, so
        # numbers drawn a thousand at a time are still consecutive (one at a time, the
        # sequence cost a third of the COPY).
        f"(line bigint GENERATED ALWAYS AS IDENTITY (START 2 CACHE 1000), "
        f"{', '.join(f'{c} text' for c in raw_columns)})"
    )
    try:
        with transaction.atomic():
            cursor.execute(f"CREATE UNLOGGED TABLE {raw} {columns}")
    except DatabaseError as exc:
        if not isinstance(exc.__cause__, psycopg.errors.InsufficientPrivilege):
            raise
        # A role that may not create tables in its schema: a temporary table (the checks
        # then run serially, as before).
        cursor.execute(f"CREATE TEMPORARY TABLE {raw} {columns}")
    read, lines, quoted = len(first), 0, False
    try:
        with (
            transaction.atomic(),
            cursor.cursor.copy(
                f"COPY {raw} ({', '.join(raw_columns)}) FROM STDIN WITH (FORMAT csv)",
                # Written as it comes: psycopg's default writer queues blocks for a thread,
                # and a file read faster than the server takes it would pile up in memory.
                writer=LibpqWriter(cursor.cursor),
            ) as copy,
        ):
            while chunk := stream.read(CHUNK):
                copy.write(chunk)
                starts.feed(chunk)
                read += len(chunk)
                lines += chunk.count("\n")
                quoted = quoted or '"' in chunk
                if progress:
                    progress(lines, read)
        rows = cursor.cursor.rowcount  # COPY's own count
    except (psycopg.errors.BadCopyFileFormat, psycopg.DataError) as exc:
        raise _Refused(str(exc)) from None
    starts.close()
    # The planner's row counts: without them it would loop over the namespaces per row.
    cursor.execute(f"ANALYZE {raw}")
    if quoted:
        # A quoted cell holding a line break would move every later line number.
        cells = " OR ".join(f"strpos({c}, E'\\n') > 0" for c in raw_columns)
        cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {raw} WHERE {cells})")
        if cursor.fetchone()[0]:
            raise _Refused("a cell holds a line break")
    return rows


def _ensure_months(cursor, raw: str, position: dict[str, int], found: set[str] | None) -> None:
    """The month partitions of the file's first to last month, and one on either side (an
    offset can move an instant into the next or the previous UTC month). Read from the
    cells' text: a row the rules parse later may still land in the default partition."""
    if not partitioned():
        return
    if found is None:
        ts = f"c{position['timestamp']}"
        cursor.execute(
            f"SELECT DISTINCT substr({ts}, 1, 7) FROM {raw} "
            f"WHERE {ts} ~ '^[0-9]{{4}}-(0[1-9]|1[0-2])-'"
        )
        found = {month for (month,) in cursor.fetchall()}
    if not found:
        return
    first, last = min(found), max(found)
    lo = date(int(first[:4]), int(first[5:7]), 1) - timedelta(days=1)
    hi = next_month(date(int(last[:4]), int(last[5:7]), 1))
    ensure_months(lo, hi)


def _import(cursor, raw: str, rows: int, position, naive, plain_timestamps: bool) -> ImportResult:
    result = ImportResult(rows=rows, method="copy")

    def cell(name: str) -> str | None:
        return f"r.c{position[name]}" if name in position else None

    # Cells are checked as they are: one with spaces around it, or a NULL (COPY's unquoted
    # empty cell), is not plain and goes by the rules, which strip it.
    # Amounts of 11 whole digits go by the rules: 99999999999.5 is above AMOUNT_MAX.
    checks = [
        # Every timestamp plain, as the file streamed showed: not checked again.
        "true" if plain_timestamps else _plain_timestamp(cell("timestamp"), naive),
        "ns.id IS NOT NULL",
        "res.id IS NOT NULL",
        _plain_amount(cell("allocated"), whole=10, decimals=3),
    ]
    values = {"pending": "0::numeric", "utilization": "NULL::numeric", "wait": "NULL::integer"}
    if pending := cell("pending"):
        checks.append(_optional(pending, _plain_amount(pending, whole=10, decimals=3)))
        values["pending"] = f"COALESCE(NULLIF({pending}, '')::numeric, 0)"
    if utilization := cell("utilization"):
        plain = _plain_amount(utilization, whole=3, decimals=2)
        checks.append(
            _optional(
                utilization,
                f"(CASE WHEN {plain} THEN {utilization}::numeric <= 100 ELSE false END)",
            )
        )
        values["utilization"] = f"NULLIF({utilization}, '')::numeric"
    if wait := cell("wait_seconds"):
        checks.append(
            _optional(wait, f"(translate({wait}, {DIGITS}, '') = '' AND length({wait}) <= 9)")
        )
        values["wait"] = f"NULLIF({wait}, '')::integer"
    # Each check is safe alone (no cast outside a CASE), so their order does not matter; the
    # casts of the select list run only on the rows that pass them.
    checked = " AND ".join(checks)
    source = f"""
        FROM {raw} r
        LEFT JOIN (
            SELECT tn.id, tn.cluster_id, tn.name, c.name AS cluster
            FROM quotas_teamnamespace tn JOIN quotas_cluster c ON c.id = tn.cluster_id
        ) ns ON ns.cluster = {cell("cluster")} AND ns.name = {cell("namespace")}
        LEFT JOIN quotas_resource res ON res.name = {cell("resource")}
    """
    plain = f"""
        SELECT r.line, ns.id, res.id, {_instant(cell("timestamp"), naive)},
            {cell("allocated")}::numeric, {values["utilization"]}, {values["pending"]},
            {values["wait"]}, ns.cluster_id
        {source}
        WHERE {checked}
    """
    # What a foreign key would do per row, once: no namespace or resource can be deleted
    # before this transaction ends (renaming one stays free). All of them: finding the ones
    # the file names would cost a pass over it.
    cursor.execute("SELECT 1 FROM quotas_teamnamespace FOR KEY SHARE")
    cursor.execute("SELECT 1 FROM quotas_resource FOR KEY SHARE")
    # The row counts of a staging table say nothing of how many rows pass the checks: the
    # planner would loop over the namespaces for each row instead of hashing them once.
    cursor.execute("SET LOCAL enable_nestloop = off")
    try:
        # A file of new samples (most are) is inserted without ON CONFLICT, which cost a
        # quarter of an import; one that repeats samples it looks like it does (or turns out
        # to) is upserted.
        fresh = not _seen_before(cursor, source, checked, cell("timestamp"), naive, rows)
        # The plain rows, checked and converted by a statement PostgreSQL may run in
        # parallel, and sorted there in the samples' key order (by each worker, then merged),
        # which a plain write then keeps: sorted in the insert instead, the sort was serial.
        cursor.execute(
            "CREATE TEMPORARY TABLE usage_import_plain (line, ns_id, res_id, ts, allocated, "
            f"utilization, pending, wait, cluster_id) ON COMMIT DROP AS {plain} ORDER BY 2, 3, 4"
        )
        converted = cursor.rowcount
        plain = "SELECT * FROM usage_import_plain"
        # Most files are plain throughout: one write.
        if converted == result.rows:
            try:
                with transaction.atomic():
                    written = _upsert(cursor, plain, distinct=False, fresh=fresh, ordered=True)
                _count(written, result)
                return result
            except _Repeated:
                pass
        cursor.execute(
            "CREATE TEMPORARY TABLE usage_import_rows (line bigint, team_namespace_id bigint, "
            'resource_id bigint, "timestamp" timestamptz, allocated numeric(14, 3), '
            "utilization numeric(5, 2), pending numeric(14, 3), wait_seconds integer, "
            "cluster_id bigint) ON COMMIT DROP"
        )
        _rows_by_rules(cursor, source, checked, position, result)
        every = f"{plain} UNION ALL SELECT * FROM usage_import_rows"
        try:
            with transaction.atomic():
                written = _upsert(cursor, every, distinct=False, fresh=fresh)
        except _Repeated:
            # The same namespace, resource and time twice: the later line wins, as row by row.
            written = _upsert(cursor, every, distinct=True)
        _count(written, result)
    except DatabaseError as exc:
        if not isinstance(exc.__cause__, psycopg.DataError):
            raise
        raise _Refused(str(exc)) from None  # a date that does not exist, in a plain form
    return result


class _Repeated(Exception):
    """The rows hold the same namespace, resource and time twice."""


def _count(written: list[tuple], result: ImportResult) -> None:
    tz = ZoneInfo(settings.TIME_ZONE)
    for cluster_id, count, first, last in written:
        result.imported += count
        result.add_day(cluster_id, first.astimezone(tz).date())
        result.add_day(cluster_id, last.astimezone(tz).date())


def _rows_by_rules(cursor, source, checked, position, result: ImportResult) -> None:
    """The rows the SQL did not take, parsed by the row-by-row rules: an error each, or a row
    for the upsert (a form such as 1e3)."""
    columns = [n for n in (*REQUIRED, *OPTIONAL) if n in position]
    cells = ", ".join(f"COALESCE(r.c{position[n]}, '')" for n in columns)
    lookups = _Lookups()
    tz = ZoneInfo(settings.TIME_ZONE)
    with connection.connection.cursor(name="usage_import_other") as named:
        named.execute(
            f"SELECT r.line, {cells} {source} WHERE ({checked}) IS NOT TRUE ORDER BY r.line"
        )
        while batch := named.fetchmany(FETCH):
            parsed_rows = []
            for line, *row_cells in batch:
                row = dict(zip(columns, row_cells, strict=True))
                try:
                    parsed = _parse(row, lookups, tz)
                except _RowInvalid as exc:
                    result.add_error(RowError(line, exc.field, exc.message))
                    continue
                parsed_rows.append((line, *parsed))
            if parsed_rows:
                with cursor.cursor.copy(
                    "COPY usage_import_rows (line, team_namespace_id, resource_id, "
                    '"timestamp", allocated, utilization, pending, wait_seconds, cluster_id) '
                    "FROM STDIN"
                ) as copy:
                    for row in parsed_rows:
                        copy.write_row(row)


# How many of the file's rows _seen_before looks up, spread evenly over the file.
PROBES = 1000


def _seen_before(cursor, source: str, checked: str, timestamp: str, naive: bool, rows: int):
    """Whether some of the file's samples are stored already (from an earlier import): a
    thousand rows spread over the file looked up by the samples' key. A file that repeats
    only a few stored samples may not show it; its insert then fails and it is upserted."""
    step = max(rows // PROBES, 1)
    cursor.execute(
        f"""
        SELECT EXISTS (
            SELECT 1 FROM (
                SELECT ns.id AS ns_id, res.id AS res_id, {_instant(timestamp, naive)} AS ts
                {source}
                WHERE r.line %% %s = 0 AND {checked}
            ) s
            JOIN quotas_usagesample u ON u.team_namespace_id = s.ns_id
                AND u.resource_id = s.res_id AND u."timestamp" = s.ts AND u.source = 'csv'
        )
        """,
        [step],
    )
    return cursor.fetchone()[0]


def _upsert(
    cursor, selected: str, *, distinct: bool, fresh: bool = False, ordered: bool = False
) -> list[tuple]:
    """Per cluster: the samples written, the first and the last instant. ``fresh``: the
    samples are new, tried with a plain INSERT first. ``ordered``: ``selected`` reads a
    table made in the samples' key order, written in that order without sorting again."""
    rows = (
        f"SELECT DISTINCT ON (2, 3, 4) * FROM ({selected}) s ORDER BY 2, 3, 4, 1 DESC"
        if distinct
        else selected
    )
    if fresh:
        try:
            with transaction.atomic():
                return _write(cursor, rows, on_conflict=False, ordered=ordered)
        except IntegrityError as exc:
            if not isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                raise
            # Stored already, or twice in the file: the upsert says which.
    return _write(cursor, rows, on_conflict=True, ordered=ordered)


def _write(cursor, rows: str, *, on_conflict: bool, ordered: bool) -> list[tuple]:
    conflict = (
        """ON CONFLICT (team_namespace_id, resource_id, "timestamp", source) DO UPDATE SET
                    allocated = EXCLUDED.allocated, utilization = EXCLUDED.utilization,
                    pending = EXCLUDED.pending, wait_seconds = EXCLUDED.wait_seconds"""
        if on_conflict
        else ""
    )
    # In the key's order: each namespace's entries of the key are written together instead of
    # a page here and a page there (a third faster than in the file's time order). A month a
    # file fills is then not in time order on disk, which only the time index (BRIN) notices:
    # the beat's rollups read the current month, which the collector writes in time order.
    try:
        cursor.execute(f"""
            INSERT INTO quotas_usagesample (team_namespace_id, resource_id, "timestamp",
                allocated, utilization, pending, pending_pods, wait_seconds, evictions, source)
            SELECT ns_id, res_id, ts, allocated, utilization, pending, 0, wait, 0, 'csv'
            FROM ({rows}) src (line, ns_id, res_id, ts, allocated, utilization, pending, wait,
                cluster_id)
            {"" if ordered else "ORDER BY ns_id, res_id, ts"}
            {conflict}
        """)
    except DatabaseError as exc:
        if isinstance(exc.__cause__, psycopg.errors.CardinalityViolation):
            raise _Repeated from None
        raise
    # Every row was written, inserted or (ON CONFLICT DO UPDATE) updated: what was written is
    # what was selected, summed from there. (RETURNING the written rows into the summary
    # cost 8% of the write: a tuple store of every row and a join per row.)
    cursor.execute(f"""
        SELECT cluster_id, count(*), min(ts), max(ts)
        FROM ({rows}) src (line, ns_id, res_id, ts, allocated, utilization, pending, wait,
            cluster_id)
        GROUP BY cluster_id
    """)
    return cursor.fetchall()
