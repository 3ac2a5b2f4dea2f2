"""The demo's usage history: the production GPU trace the repository carries (Alibaba's openb
pods, ``usage/trace.py``) replayed onto the demo cluster's namespaces, so that a new demo opens
with charts, canary metrics, suggestions and their backtest instead of empty pages.

Each workload class of the trace (inference, training, dev) goes to the cluster's first
namespace of that class; the trace's last ``days`` days end yesterday, sampled every five
minutes; each namespace's demand is scaled so that its highest is its cap (what ran is what a
quota within the cap lets run; the trace's own scale is another cluster's) and counted in whole
units where the resource has them (GPUs, MIG slices). The samples are stored as imported
history (source CSV), then rolled up, and last month's suggestions and backtest are computed.
Only a cluster without any sample gets it: run again, it does nothing.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction

from quotas.kube.client import KubeError
from quotas.models import Allocation, Cluster
from usage.backtest import backtest_compute
from usage.models import UsageSample
from usage.partitions import ensure_months
from usage.rollup import usage_rollup
from usage.suggest import WHOLE_UNIT_KINDS
from usage.suggestions import previous_month, suggestions_compute
from usage.trace import read_trace, replay

TRACE = Path(__file__).resolve().parents[1] / "tests/data/alibaba-openb-2023/openb_gpu_pods.csv"
STEP = 300
PREFIX = "trace"


@dataclass(frozen=True)
class DemoHistory:
    samples: int
    namespaces: list[str]
    start: date
    end: date
    suggestions: int
    backtests: int


def demo_history_import(
    *, cluster: Cluster, today: date, days: int = 61, trace: Path = TRACE
) -> DemoHistory | None:
    """Replay the trace's last ``days`` days onto ``cluster``, ending the day before ``today``;
    None when the cluster has samples already, the trace is missing or no namespace fits."""
    if UsageSample.objects.filter(team_namespace__cluster=cluster).exists():
        return None
    if not trace.is_file():
        return None
    targets: dict[str, Allocation] = {}
    allocations = (
        Allocation.objects.filter(team_namespace__cluster=cluster, cap__gt=0)
        .select_related("team_namespace", "resource")
        .order_by("team_namespace__name", "resource__name")
    )
    for allocation in allocations:
        kind = allocation.team_namespace.workload_class
        targets.setdefault(f"{PREFIX}-{kind}-0", allocation)
    if not targets:
        return None
    with trace.open(newline="") as f:
        pods = read_trace(csv.DictReader(f), prefix=PREFIX, teams_per_kind=1)
    last_second = max(p.deleted for p in pods)
    trace_days = last_second // 86_400
    days = min(days, trace_days)
    first_second = (trace_days - days) * 86_400
    tz = ZoneInfo(settings.TIME_ZONE)
    first_day = today - timedelta(days=days)
    start = datetime.combine(first_day, time.min, tzinfo=tz) - timedelta(seconds=first_second)
    # (namespace, time) -> (running, pending) of the trace, before scaling
    series: dict[str, list[tuple[datetime, Decimal, Decimal]]] = defaultdict(list)
    for when, _, ns, _, allocated, _, pending, _ in replay(
        pods,
        cluster=cluster.name,
        start=start,
        step=STEP,
        first_second=first_second,
        last_second=trace_days * 86_400 - STEP,
    ):
        if ns in targets:
            series[ns].append((datetime.fromisoformat(when), Decimal(allocated), Decimal(pending)))
    rows = []
    for ns, points in series.items():
        allocation = targets[ns]
        peak = max((a + p for _, a, p in points), default=Decimal(0))
        scale = allocation.cap / peak if peak else Decimal(0)
        whole = allocation.resource.kind in WHOLE_UNIT_KINDS
        for at, allocated, pending in points:
            ran, waited = _scaled(allocated, scale, whole), _scaled(pending, scale, whole)
            rows.append(
                UsageSample(
                    team_namespace=allocation.team_namespace,
                    resource=allocation.resource,
                    timestamp=at,
                    allocated=ran,
                    pending=waited,
                    pending_pods=int(waited > 0),
                    source="csv",
                )
            )
    end = today - timedelta(days=1)
    ensure_months(first_day - timedelta(days=1), today)  # PostgreSQL: the months they fill
    with transaction.atomic():
        UsageSample.objects.bulk_create(rows, batch_size=5000)
    usage_rollup(start=first_day, end=end, cluster_id=cluster.pk)
    month = previous_month(today)
    suggestions = suggestions_compute(cluster=cluster, month=month, today=today)
    backtests = backtest_compute(cluster=cluster, month=month)
    return DemoHistory(
        samples=len(rows),
        namespaces=sorted(targets[ns].team_namespace.name for ns in series),
        start=first_day,
        end=end,
        suggestions=suggestions,
        backtests=backtests,
    )


def _scaled(value: Decimal, scale: Decimal, whole: bool) -> Decimal:
    scaled = value * scale
    if whole:
        return scaled.quantize(Decimal(1), rounding=ROUND_HALF_UP)
    return scaled.quantize(Decimal("0.001"), rounding=ROUND_HALF_UP)


# --- the demo's running work ------------------------------------------------------------------

WORK_LABEL = "quota-portal.io/demo-work"
WEEK = timedelta(days=7)


def demo_work_targets(*, cluster: Cluster, now: datetime) -> dict[tuple[str, str], int]:
    """Per (namespace, resource) of the cluster's whole-unit allocations: the units its demo
    work holds now, what the namespace held a week before (its history, then what the cluster
    itself showed), within its cap. One query for the samples, one for the allocations."""
    allocations = list(
        Allocation.objects.filter(team_namespace__cluster=cluster, cap__gt=0).select_related(
            "team_namespace", "resource"
        )
    )
    allocations = [a for a in allocations if a.resource.kind in WHOLE_UNIT_KINDS]
    then = now - WEEK
    latest = {}
    rows = (
        UsageSample.objects.filter(
            team_namespace__cluster=cluster,
            timestamp__gt=then - timedelta(hours=1),
            timestamp__lte=then,
        )
        .order_by("timestamp")
        .values_list("team_namespace_id", "resource_id", "allocated")
    )
    for ns_id, res_id, allocated in rows:
        latest[(ns_id, res_id)] = allocated  # the last one before ``then`` wins
    return {
        (a.team_namespace.name, a.resource.name): int(
            min(latest.get((a.team_namespace_id, a.resource_id), Decimal(0)), a.cap)
        )
        for a in allocations
    }


def demo_work_tick(*, cluster: Cluster, client, now: datetime) -> dict[tuple[str, str], int]:
    """Bring the cluster's demo work to its targets: one running pod per unit, labelled as the
    demo's, created or deleted as the targets move (nothing else is touched). A pod the
    cluster refuses is left out until the next tick. Returns what runs afterwards."""
    targets = demo_work_targets(cluster=cluster, now=now)
    classes = {
        (a.team_namespace.name, a.resource.name): list(a.priority_classes)
        for a in Allocation.objects.filter(team_namespace__cluster=cluster).select_related(
            "team_namespace", "resource"
        )
    }
    running: dict[tuple[str, str], list[str]] = defaultdict(list)
    for pod in client.list("v1", "Pod", label_selector=WORK_LABEL):
        meta = pod["metadata"]
        key = (meta["namespace"], meta.get("labels", {}).get(WORK_LABEL, ""))
        running[key].append(meta["name"])
    wanted = {(ns, _label_value(res)): n for (ns, res), n in targets.items()}
    for (namespace, label), pods in running.items():
        for name in sorted(pods)[wanted.get((namespace, label), 0) :]:
            client.delete("v1", "Pod", namespace, name)
    held = {}
    for (namespace, resource), want in sorted(targets.items()):
        have = sorted(running.get((namespace, _label_value(resource)), []))
        names = set(have)
        count = min(len(have), want)
        n = 0
        while count < want:
            n += 1
            name = f"demo-work-{n}"
            if name in names:
                continue
            try:
                client.create(
                    _work_pod(namespace, name, resource, classes.get((namespace, resource)))
                )
            except KubeError:
                break
            count += 1
        held[(namespace, resource)] = count
    return held


def _label_value(resource: str) -> str:
    # A label value has no slash: nvidia.com/gpu -> nvidia.com_gpu
    return resource.replace("/", "_")


def _work_pod(namespace: str, name: str, resource: str, classes: list[str] | None) -> dict:
    spec: dict = {
        "containers": [
            {
                "name": "work",
                "image": "registry.invalid/demo-work",
                "resources": {
                    "requests": {"cpu": "100m", "memory": "128Mi", resource: "1"},
                    "limits": {resource: "1"},
                },
            }
        ],
        # Within any maximum run time the namespace has (an hour; the next ticks replace it).
        "activeDeadlineSeconds": 3600,
    }
    if classes:
        spec["priorityClassName"] = classes[0]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {WORK_LABEL: _label_value(resource)},
        },
        "spec": spec,
        "status": {"phase": "Running"},
    }
