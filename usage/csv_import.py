"""Import of usage history from CSV: streamed in batches (constant memory), idempotent (a row
replaces the sample of the same namespace, resource, time and source), bad rows reported with
their line number and the field and rule they break while the good ones are kept.

Columns: ``timestamp`` (ISO 8601; without an offset it is in TIME_ZONE), ``cluster``,
``namespace``, ``resource``, ``allocated`` (units held by running pods), and optional
``utilization`` (0-100), ``pending`` (units requested by pending pods), ``wait_seconds``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import connection, transaction

from quotas.models import Resource, TeamNamespace
from usage.models import UsageSample, UsageSource
from usage.partitions import ensure_months
from usage.rollup import usage_rollup

REQUIRED = ("timestamp", "cluster", "namespace", "resource", "allocated")
OPTIONAL = ("utilization", "pending", "wait_seconds")
BATCH = 20_000
KEPT_ERRORS = 200  # only so many bad rows are kept to show; the rest are counted
AMOUNT_MAX = Decimal("99999999999")  # 14 digits, 3 of them decimals


class CsvHeaderError(ValueError):
    """The file cannot be imported at all (no header, a required column missing)."""


@dataclass(frozen=True)
class RowError:
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.field}: {self.message}"


@dataclass
class ImportResult:
    rows: int = 0
    imported: int = 0
    errors: list[RowError] = field(default_factory=list)
    error_count: int = 0
    # (cluster id) -> (first day, last day) of what was imported, for the rollup.
    days: dict[int, tuple[date, date]] = field(default_factory=dict)
    # "copy": COPYed and checked in SQL (PostgreSQL); "rows": parsed row by row.
    method: str = "rows"

    def add_error(self, error: RowError) -> None:
        self.error_count += 1
        if len(self.errors) < KEPT_ERRORS:
            self.errors.append(error)

    def add_day(self, cluster_id: int, day: date) -> None:
        first, last = self.days.get(cluster_id, (day, day))
        self.days[cluster_id] = (min(first, day), max(last, day))


class _RowInvalid(Exception):
    def __init__(self, field_name: str, message: str):
        self.field, self.message = field_name, message


def _amount(row: dict, name: str, *, required: bool) -> Decimal:
    raw = (row.get(name) or "").strip()
    if not raw:
        if required:
            raise _RowInvalid(name, "is required")
        return Decimal(0)
    try:
        value = Decimal(raw)
    except InvalidOperation:
        raise _RowInvalid(name, f"{raw!r} is not a number") from None
    if not value.is_finite() or value < 0:
        raise _RowInvalid(name, f"{raw} must be a number ≥ 0")
    if value > AMOUNT_MAX or value != value.quantize(Decimal("0.001")):
        raise _RowInvalid(name, f"{raw} must be below 10^11 with at most 3 decimals")
    return value


class _Lookups:
    """Cluster/namespace and resource names to ids, loaded on first use and kept."""

    def __init__(self) -> None:
        self.namespaces: dict[tuple[str, str], tuple[int, int] | None] = {}
        self.resources: dict[str, int | None] = {}
        self.clusters: set[str] = set(
            TeamNamespace.objects.values_list("cluster__name", flat=True).distinct()
        )

    def namespace(self, cluster: str, namespace: str) -> tuple[int, int]:
        key = (cluster, namespace)
        if key not in self.namespaces:
            found = (
                TeamNamespace.objects.filter(cluster__name=cluster, name=namespace)
                .values_list("id", "cluster_id")
                .first()
            )
            self.namespaces[key] = found
        found = self.namespaces[key]
        if found is None:
            if cluster not in self.clusters:
                raise _RowInvalid("cluster", f"no cluster {cluster!r} with team namespaces")
            raise _RowInvalid("namespace", f"{namespace!r} is not a team namespace of {cluster}")
        return found

    def resource(self, name: str) -> int:
        if name not in self.resources:
            self.resources[name] = (
                Resource.objects.filter(name=name).values_list("id", flat=True).first()
            )
        found = self.resources[name]
        if found is None:
            raise _RowInvalid("resource", f"{name!r} is not in the resource catalog")
        return found


def _parse(row: dict, lookups: _Lookups, tz: ZoneInfo) -> tuple:
    raw_ts = (row.get("timestamp") or "").strip()
    if not raw_ts:
        raise _RowInvalid("timestamp", "is required")
    try:
        when = datetime.fromisoformat(raw_ts.replace("Z", "+00:00"))
    except ValueError:
        raise _RowInvalid("timestamp", f"{raw_ts!r} is not an ISO 8601 time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=tz)
    cluster = (row.get("cluster") or "").strip()
    if not cluster:
        raise _RowInvalid("cluster", "is required")
    namespace = (row.get("namespace") or "").strip()
    if not namespace:
        raise _RowInvalid("namespace", "is required")
    ns_id, cluster_id = lookups.namespace(cluster, namespace)
    resource = (row.get("resource") or "").strip()
    if not resource:
        raise _RowInvalid("resource", "is required")
    resource_id = lookups.resource(resource)
    allocated = _amount(row, "allocated", required=True)
    pending = _amount(row, "pending", required=False)
    raw_util = (row.get("utilization") or "").strip()
    utilization = None
    if raw_util:
        try:
            utilization = Decimal(raw_util)
        except InvalidOperation:
            raise _RowInvalid("utilization", f"{raw_util!r} is not a number") from None
        if not utilization.is_finite() or not 0 <= utilization <= 100:
            raise _RowInvalid("utilization", f"{raw_util} must be between 0 and 100")
        utilization = utilization.quantize(Decimal("0.01"))
    raw_wait = (row.get("wait_seconds") or "").strip()
    wait = None
    if raw_wait:
        try:
            wait = int(Decimal(raw_wait))
        except (InvalidOperation, ValueError):
            raise _RowInvalid("wait_seconds", f"{raw_wait!r} is not a number") from None
        if wait < 0 or wait > 2**31 - 1:
            raise _RowInvalid("wait_seconds", f"{raw_wait} must be between 0 and 2147483647")
    return ns_id, resource_id, when, allocated, utilization, pending, wait, cluster_id


class _CountingLines:
    """The file's lines, counting the characters read (for the progress display)."""

    def __init__(self, lines: Iterable[str]):
        self.lines, self.read = lines, 0

    def __iter__(self) -> Iterator[str]:
        for line in self.lines:
            self.read += len(line)
            yield line


def _header(fieldnames: list[str] | None) -> list[str]:
    header = [h.strip() for h in (fieldnames or [])]
    if not header:
        raise CsvHeaderError("the file is empty: expected a header line")
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise CsvHeaderError(
            f"column {', '.join(missing)} missing from the header "
            f"(required: {', '.join(REQUIRED)}; optional: {', '.join(OPTIONAL)})"
        )
    return header


def usage_import_csv(
    *,
    stream: io.TextIOBase | Iterable[str],
    rollup: bool = True,
    progress: Callable[[int, int], None] | None = None,
    copy: bool = True,
) -> ImportResult:
    """Import every good row of ``stream``; ``progress(rows, characters read)`` is called as
    the file is read. Raises CsvHeaderError when the header lacks a required column.

    On PostgreSQL a seekable file (not an iterable of lines) is COPYed whole into a staging
    table and checked and upserted in SQL (csv_copy.py); rows the SQL cannot vouch for are
    parsed here, one by one, with the same rules. A file COPY cannot take (a row with more or
    fewer cells than the header, a blank line, a date that does not exist) is read again from
    the start row by row, as on SQLite (``copy=False`` asks for that path)."""
    result = None
    seekable = getattr(stream, "seekable", None)
    if copy and connection.vendor == "postgresql" and seekable and seekable():
        from usage.csv_copy import usage_import_copy

        start = stream.tell()
        result = usage_import_copy(stream=stream, progress=progress)
        if result is None:
            stream.seek(start)
    if result is None:
        result = _import_rows(stream=stream, progress=progress)
        if result.days:
            # PostgreSQL: months without a partition took their samples in the default one;
            # made now, they take them over (the COPY path makes them before writing).
            first = min(first for first, _ in result.days.values())
            last = max(last for _, last in result.days.values())
            ensure_months(first - timedelta(days=1), last + timedelta(days=1))
    if rollup:
        for cluster_id, (first, last) in sorted(result.days.items()):
            usage_rollup(start=first, end=last, cluster_id=cluster_id)
    return result


def _import_rows(
    *, stream: io.TextIOBase | Iterable[str], progress: Callable[[int, int], None] | None
) -> ImportResult:
    """Row by row: each parsed here, written in batches."""
    counting = _CountingLines(stream)
    reader = csv.DictReader(counting)
    reader.fieldnames = _header(reader.fieldnames)
    tz = ZoneInfo(settings.TIME_ZONE)
    lookups = _Lookups()
    result = ImportResult()
    batch: dict[tuple, tuple] = {}
    for row in reader:
        result.rows += 1
        if None in row:  # more cells than the header has
            result.add_error(RowError(reader.line_num, "row", "more cells than the header"))
            continue
        try:
            parsed = _parse(row, lookups, tz)
        except _RowInvalid as exc:
            result.add_error(RowError(reader.line_num, exc.field, exc.message))
            continue
        # A later row of the same namespace, resource and time replaces an earlier one.
        batch[(parsed[0], parsed[1], parsed[2])] = parsed
        result.add_day(parsed[7], parsed[2].astimezone(tz).date())
        if len(batch) >= BATCH:
            result.imported += _write(batch.values())
            batch.clear()
            if progress:
                progress(result.rows, counting.read)
    if batch:
        result.imported += _write(batch.values())
    if progress:
        progress(result.rows, counting.read)
    return result


_STAGE_SQL = """
CREATE TEMPORARY TABLE IF NOT EXISTS usage_import_stage (
    team_namespace_id bigint, resource_id bigint, "timestamp" timestamptz,
    allocated numeric(14, 3), utilization numeric(5, 2), pending numeric(14, 3),
    wait_seconds integer
) ON COMMIT DELETE ROWS
"""
_UPSERT_SQL = """
INSERT INTO quotas_usagesample (team_namespace_id, resource_id, "timestamp", allocated,
    utilization, pending, pending_pods, wait_seconds, evictions, source)
SELECT team_namespace_id, resource_id, "timestamp", allocated, utilization, pending, 0,
    wait_seconds, 0, 'csv'
FROM usage_import_stage
ON CONFLICT (team_namespace_id, resource_id, "timestamp", source) DO UPDATE SET
    allocated = EXCLUDED.allocated, utilization = EXCLUDED.utilization,
    pending = EXCLUDED.pending, wait_seconds = EXCLUDED.wait_seconds
"""


def _write(rows: Iterable[tuple]) -> int:
    rows = list(rows)
    if connection.vendor == "postgresql":
        # COPY into a staging table, then one upsert: far faster than INSERT ... VALUES.
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_STAGE_SQL)
            # Also inside an outer transaction (tests, callers' atomic blocks) start empty.
            cursor.execute("TRUNCATE usage_import_stage")
            with cursor.cursor.copy(
                'COPY usage_import_stage (team_namespace_id, resource_id, "timestamp", '
                "allocated, utilization, pending, wait_seconds) FROM STDIN"
            ) as copy:
                for ns_id, res_id, when, allocated, util, pending, wait, _ in rows:
                    copy.write_row((ns_id, res_id, when, allocated, util, pending, wait))
            cursor.execute(_UPSERT_SQL)
        return len(rows)
    with transaction.atomic():
        UsageSample.objects.bulk_create(
            [
                UsageSample(
                    team_namespace_id=ns_id,
                    resource_id=res_id,
                    timestamp=when,
                    allocated=allocated,
                    utilization=util,
                    pending=pending,
                    wait_seconds=wait,
                    source=UsageSource.CSV,
                )
                for ns_id, res_id, when, allocated, util, pending, wait, _ in rows
            ],
            batch_size=500,
            update_conflicts=True,
            unique_fields=["team_namespace", "resource", "timestamp", "source"],
            update_fields=["allocated", "utilization", "pending", "wait_seconds"],
        )
    return len(rows)
