"""Usage read from a cluster's Prometheus: GPUs requested, GPU utilization and GPU memory per
namespace over a range of time (``/api/v1/query_range``), stored as samples.

The only module that talks to Prometheus. Timestamps are aligned to the source's step, so reading
an overlapping range again lands on the same sample times and replaces them (idempotent).
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation

import requests
from django.conf import settings
from django.db import transaction

from quotas.models import Resource, TeamNamespace
from usage.models import PrometheusSource, UsageSample, UsageSource
from usage.partitions import ensure_months

log = logging.getLogger(__name__)

# Prometheus refuses a range query of more than 11,000 points per series.
MAX_POINTS = 10_000
WRITE_BATCH = 5_000
DEFAULT_RESOURCE = "nvidia.com/gpu"


class PrometheusError(Exception):
    """Prometheus could not be reached or refused the query (the message says which)."""


class PrometheusClient:
    def __init__(self, url: str, *, timeout: float | None = None):
        self.url = url.rstrip("/")
        self.timeout = timeout if timeout is not None else settings.PROMETHEUS_TIMEOUT
        self.session = requests.Session()

    def close(self) -> None:
        self.session.close()

    def query_range(
        self, query: str, *, start: datetime, end: datetime, step: int
    ) -> list[tuple[dict[str, str], list[tuple[float, str]]]]:
        """(labels, [(unix time, value)]) per series of a matrix result."""
        try:
            response = self.session.post(
                f"{self.url}/api/v1/query_range",
                data={
                    "query": query,
                    "start": f"{start.timestamp():.3f}",
                    "end": f"{end.timestamp():.3f}",
                    "step": str(step),
                },
                timeout=self.timeout,
            )
        except requests.RequestException as exc:
            raise PrometheusError(f"{self.url}: {type(exc).__name__}: {exc}") from None
        try:
            payload = response.json()
        except ValueError:
            raise PrometheusError(
                f"{self.url}: HTTP {response.status_code}, not a Prometheus answer"
            ) from None
        if payload.get("status") != "success":
            raise PrometheusError(
                f"{self.url}: query {query!r} failed: {payload.get('errorType', '')} "
                f"{payload.get('error', '')}".strip()
            )
        data = payload.get("data") or {}
        if data.get("resultType") != "matrix":
            raise PrometheusError(f"query {query!r} gave {data.get('resultType')}, not a matrix")
        return [(s.get("metric") or {}, s.get("values") or []) for s in data.get("result") or []]


def _aligned(when: datetime, step: int, *, up: bool) -> datetime:
    seconds = when.timestamp() / step
    seconds = math.ceil(seconds) if up else math.floor(seconds)
    return datetime.fromtimestamp(seconds * step, tz=UTC)


def _number(value: str) -> Decimal | None:
    try:
        number = Decimal(value)
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def _by_namespace(series, label: str) -> dict[tuple[str, int], Decimal]:
    values: dict[tuple[str, int], Decimal] = {}
    for labels, points in series:
        namespace = labels.get(label)
        if not namespace:
            continue
        for ts, value in points:
            number = _number(value)
            if number is not None:
                key = (namespace, int(float(ts)))
                values[key] = values.get(key, Decimal(0)) + number
    return values


def _query(source: PrometheusSource, text: str) -> str:
    return text.replace("{label}", source.namespace_label)


def usage_collect_prometheus(
    *,
    source: PrometheusSource,
    start: datetime,
    end: datetime,
    client: PrometheusClient | None = None,
) -> int:
    """Store samples of every managed namespace of the source's cluster from ``start`` to
    ``end`` (aligned to the step). At every time Prometheus has GPU requests for, a managed
    namespace it does not name held nothing. Returns the number of samples written."""
    step = source.step_seconds
    start, end = _aligned(start, step, up=True), _aligned(end, step, up=False)
    if end < start:
        return 0
    resource = source.resource or Resource.objects.filter(name=DEFAULT_RESOURCE).first()
    if resource is None:
        raise PrometheusError(f"resource {DEFAULT_RESOURCE} is not in the catalog")
    namespaces = dict(
        TeamNamespace.objects.filter(cluster_id=source.cluster_id).values_list("name", "id")
    )
    # A back-fill's months (PostgreSQL), so its samples land in them.
    ensure_months(start, end)
    own_client = client is None
    client = client or PrometheusClient(source.url)
    written = 0
    try:
        window = timedelta(seconds=step * MAX_POINTS)
        chunk_start = start
        while chunk_start <= end:
            chunk_end = min(end, chunk_start + window)
            written += _collect_window(source, client, namespaces, resource, chunk_start, chunk_end)
            chunk_start = chunk_end + timedelta(seconds=step)
    finally:
        if own_client:
            client.close()
    log.info("prometheus %s: %s samples %s..%s", source.cluster, written, start, end)
    return written


def _collect_window(source, client, namespaces, resource, start, end) -> int:
    step, label = source.step_seconds, source.namespace_label
    requested = _by_namespace(
        client.query_range(
            _query(source, source.gpu_requests_query), start=start, end=end, step=step
        ),
        label,
    )
    utilization: dict[tuple[str, int], Decimal] = {}
    if source.gpu_utilization_query:
        utilization = _by_namespace(
            client.query_range(
                _query(source, source.gpu_utilization_query), start=start, end=end, step=step
            ),
            label,
        )
    memory: dict[tuple[str, int], Decimal] = {}
    if source.gpu_memory_query:
        memory = _by_namespace(
            client.query_range(
                _query(source, source.gpu_memory_query), start=start, end=end, step=step
            ),
            label,
        )
    times = sorted({ts for _, ts in requested})
    seen: dict[int, set[str]] = defaultdict(set)
    for ns, ts in requested:
        seen[ts].add(ns)
    rows = []
    for ts in times:
        when = datetime.fromtimestamp(ts, tz=UTC)
        for name, ns_id in namespaces.items():
            util = utilization.get((name, ts))
            if util is not None:
                util = min(max(util, Decimal(0)), Decimal(100)).quantize(Decimal("0.01"))
            mem = memory.get((name, ts))
            rows.append(
                UsageSample(
                    team_namespace_id=ns_id,
                    resource=resource,
                    timestamp=when,
                    allocated=requested.get((name, ts), Decimal(0)).quantize(Decimal("0.001")),
                    utilization=util,
                    memory_used_mib=None if mem is None else mem.quantize(Decimal("0.1")),
                    source=UsageSource.PROMETHEUS,
                )
            )
    for i in range(0, len(rows), WRITE_BATCH):
        with transaction.atomic():
            UsageSample.objects.bulk_create(
                rows[i : i + WRITE_BATCH],
                update_conflicts=True,
                unique_fields=["team_namespace", "resource", "timestamp", "source"],
                update_fields=["allocated", "utilization", "memory_used_mib"],
            )
    return len(rows)
