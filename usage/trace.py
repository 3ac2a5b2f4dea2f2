"""Replay of Alibaba's 2023 GPU pod trace ("openb") as usage CSV for ``import_usage``.

The trace lists pods with ``num_gpu``, ``gpu_milli``, ``qos`` and ``creation_time``,
``scheduled_time``, ``deletion_time`` in seconds from the start of the trace; it names no teams.
The replay maps them as follows:

- **Team namespace**: the qos class says what kind of work it is (``LS``, latency sensitive:
  ``inference``; ``BE``, best effort: ``training``; ``Burstable`` and ``Guaranteed``: ``dev``)
  and a stable hash of the pod name (CRC-32) splits each kind over ``teams_per_kind``
  namespaces: ``<prefix>-inference-0``, ``<prefix>-training-1``, ...
- **GPUs**: ``num_gpu`` whole GPUs, except a GPU-sharing pod (``num_gpu`` 1 with ``gpu_milli``
  below 1000), which holds ``gpu_milli / 1000`` of one GPU. Pods without GPUs are left out.
- **Time**: second 0 of the trace is ``start``; a sample every ``step`` seconds (5 minutes).
  A pod holds its GPUs from ``scheduled_time`` until ``deletion_time``; it is pending from
  ``creation_time`` until it is scheduled (or deleted, if never scheduled), and its wait at a
  sample is the time since its creation.
"""

from __future__ import annotations

import csv
import heapq
import zlib
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from common.amounts import format_amount

KINDS = {"LS": "inference", "BE": "training", "Burstable": "dev", "Guaranteed": "dev"}
CSV_HEADER = [
    "timestamp",
    "cluster",
    "namespace",
    "resource",
    "allocated",
    "utilization",
    "pending",
    "wait_seconds",
]


@dataclass(frozen=True)
class TracePod:
    namespace: str
    gpus: Decimal
    created: int
    scheduled: int | None
    deleted: int


def pod_gpus(num_gpu: int, gpu_milli: int) -> Decimal:
    if num_gpu == 1 and 0 < gpu_milli < 1000:
        return Decimal(gpu_milli) / 1000
    return Decimal(num_gpu)


def namespace_of(name: str, qos: str, *, prefix: str, teams_per_kind: int) -> str:
    kind = KINDS.get(qos, "dev")
    return f"{prefix}-{kind}-{zlib.crc32(name.encode()) % teams_per_kind}"


def read_trace(
    rows: Iterable[dict], *, prefix: str = "trace", teams_per_kind: int = 2
) -> list[TracePod]:
    pods = []
    for row in rows:
        gpus = pod_gpus(int(row["num_gpu"]), int(row.get("gpu_milli") or 0))
        if not gpus:
            continue
        scheduled = (row.get("scheduled_time") or "").strip()
        pods.append(
            TracePod(
                namespace=namespace_of(
                    row["name"], row["qos"], prefix=prefix, teams_per_kind=teams_per_kind
                ),
                gpus=gpus,
                created=int(row["creation_time"]),
                scheduled=int(scheduled) if scheduled else None,
                deleted=int(row["deletion_time"]),
            )
        )
    return pods


def replay(
    pods: list[TracePod],
    *,
    cluster: str,
    start: datetime,
    resource: str = "nvidia.com/gpu",
    step: int = 300,
    first_second: int = 0,
    last_second: int | None = None,
) -> Iterator[list[str]]:
    """CSV rows (after the header) of every namespace at every step from ``first_second`` to
    ``last_second`` of the trace (default: the last deletion). Streams: memory grows with the
    pods alive at a time, not with the length of the replay."""
    namespaces = sorted({p.namespace for p in pods})
    end = last_second if last_second is not None else max(p.deleted for p in pods)
    # Events sorted by time: pods start running, stop running, start and stop waiting.
    by_created = sorted(pods, key=lambda p: p.created)
    i = 0
    running: list[tuple[int, int, TracePod]] = []  # heap of (ends, id, pod)
    waiting: list[tuple[int, int, TracePod]] = []
    starts: list[tuple[int, int, TracePod]] = []  # heap of (scheduled, id, pod) not yet running
    t = first_second - first_second % step
    while t <= end:
        while i < len(by_created) and by_created[i].created <= t:
            pod = by_created[i]
            if pod.scheduled is not None and pod.scheduled <= pod.created:
                heapq.heappush(starts, (pod.created, i, pod))
            else:
                until = pod.scheduled if pod.scheduled is not None else pod.deleted
                heapq.heappush(waiting, (until, i, pod))
                if pod.scheduled is not None:
                    heapq.heappush(starts, (pod.scheduled, i, pod))
            i += 1
        while starts and starts[0][0] <= t:
            _, n, pod = heapq.heappop(starts)
            heapq.heappush(running, (pod.deleted, n, pod))
        while running and running[0][0] <= t:
            heapq.heappop(running)
        while waiting and waiting[0][0] <= t:
            heapq.heappop(waiting)
        allocated: dict[str, Decimal] = defaultdict(Decimal)
        pending: dict[str, Decimal] = defaultdict(Decimal)
        wait: dict[str, int] = {}
        for _, _, pod in running:
            allocated[pod.namespace] += pod.gpus
        for _, _, pod in waiting:
            pending[pod.namespace] += pod.gpus
            wait[pod.namespace] = max(wait.get(pod.namespace, 0), t - pod.created)
        when = (start + timedelta(seconds=t)).isoformat()
        for ns in namespaces:
            yield [
                when,
                cluster,
                ns,
                resource,
                format_amount(allocated.get(ns, Decimal(0))),
                "",
                format_amount(pending.get(ns, Decimal(0))),
                str(wait[ns]) if ns in wait else "",
            ]
        t += step


def write_replay_csv(out, rows: Iterable[list[str]]) -> int:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    n = 0
    for row in rows:
        writer.writerow(row)
        n += 1
    return n
