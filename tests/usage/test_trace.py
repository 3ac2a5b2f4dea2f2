"""Alibaba's openb trace replayed through the CSV path: hand-checked replay, then a real slice
of the trace converted, imported and rolled up."""

import csv
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command

from quotas.models import Team, TeamNamespace
from usage.models import UsageDaily, UsageSample
from usage.trace import TracePod, namespace_of, pod_gpus, read_trace, replay

TRACE = Path(__file__).resolve().parents[1] / "data" / "alibaba-openb-2023" / "openb_gpu_pods.csv"
START = datetime(2025, 1, 1, tzinfo=UTC)


def test_gpus_and_namespaces_of_a_pod():
    assert pod_gpus(1, 460) == Decimal("0.46")  # GPU sharing
    assert pod_gpus(1, 1000) == 1 and pod_gpus(8, 1000) == 8
    assert namespace_of("openb-pod-0001", "LS", prefix="t", teams_per_kind=2).startswith(
        "t-inference-"
    )
    assert namespace_of("x", "BE", prefix="t", teams_per_kind=1) == "t-training-0"
    # Stable: the same pod always lands in the same namespace.
    assert namespace_of("openb-pod-0042", "BE", prefix="t", teams_per_kind=3) == namespace_of(
        "openb-pod-0042", "BE", prefix="t", teams_per_kind=3
    )


def test_replay_by_hand():
    pods = [
        TracePod("ns-a", Decimal(2), created=0, scheduled=0, deleted=900),  # runs 0..900
        TracePod("ns-a", Decimal("0.5"), created=100, scheduled=700, deleted=1000),  # waits
        TracePod("ns-b", Decimal(4), created=200, scheduled=None, deleted=800),  # never runs
    ]
    rows = list(replay(pods, cluster="c", start=START, first_second=0, last_second=900))
    got = [(r[0][11:19], r[2], r[4], r[6], r[7]) for r in rows]
    assert got == [
        ("00:00:00", "ns-a", "2", "0", ""),
        ("00:00:00", "ns-b", "0", "0", ""),
        ("00:05:00", "ns-a", "2", "0.5", "200"),
        ("00:05:00", "ns-b", "0", "4", "100"),
        ("00:10:00", "ns-a", "2", "0.5", "500"),
        ("00:10:00", "ns-b", "0", "4", "400"),
        ("00:15:00", "ns-a", "0.5", "0", ""),  # the first ended at 900, the second runs
        ("00:15:00", "ns-b", "0", "0", ""),
    ]


@pytest.mark.django_db
def test_a_slice_of_the_real_trace_replays_through_import_usage(tmp_path, cluster, gpu):
    with TRACE.open() as f:
        pods = read_trace(csv.DictReader(f), prefix="trace", teams_per_kind=2)
    for name in sorted({p.namespace for p in pods}):
        team = Team.objects.create(slug=name, name=name)
        TeamNamespace.objects.create(team=team, cluster=cluster, name=name)
    out = tmp_path / "replay.csv"
    call_command(
        "convert_trace",
        str(TRACE),
        "--cluster",
        "demo",
        "--start",
        "2025-01-01T00:00:00Z",
        "--from-day",
        "140",
        "--days",
        "2",
        "-o",
        str(out),
    )
    call_command("import_usage", str(out))
    namespaces = TeamNamespace.objects.count()
    assert UsageSample.objects.count() == 2 * 288 * namespaces
    days = UsageDaily.objects.filter(day__in=[date(2025, 5, 21), date(2025, 5, 22)])
    assert days.count() == 2 * namespaces
    # Cross-check one instant against the trace itself: GPUs of pods running at day 141 00:00.
    t = 141 * 86_400
    expected = sum(
        (p.gpus for p in pods if p.scheduled is not None and p.scheduled <= t < p.deleted),
        Decimal(0),
    )
    at = datetime(2025, 5, 22, tzinfo=UTC)
    assert sum(s.allocated for s in UsageSample.objects.filter(timestamp=at)) == expected
    assert expected > 10  # the slice is a busy part of the trace
    total_hours = sum(d.gpu_hours for d in days)
    peaks = {d.team_namespace.name: d.peak for d in days.select_related("team_namespace")}
    assert total_hours > 0 and max(peaks.values()) >= 1
