"""Usage from a real Prometheus loaded with synthetic kube-state-metrics and DCGM series."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command

from usage.collect import usage_collect
from usage.models import PrometheusSource, UsageDaily, UsageSample
from usage.prometheus import PrometheusClient, PrometheusError, usage_collect_prometheus

START = datetime(2025, 3, 1, tzinfo=UTC)
STEP = 60  # seconds between synthetic points


def series(name: str, labels: str, value, minutes: range) -> list[str]:
    ts0 = int(START.timestamp())
    return [f"{name}{{{labels}}} {value} {ts0 + m * STEP}" for m in minutes]


def openmetrics(label: str = "namespace") -> str:
    """Two hours: team-a holds 3 + 1 GPUs the first hour and 3 the second; team-b 2 GPUs.
    A CPU request and an unmanaged namespace must not count."""
    whole, first_hour = range(0, 121), range(0, 60)
    a, b = f'{label}="team-a-training"', f'{label}="team-b-inference"'
    extra = ',namespace="monitoring"' if label != "namespace" else ""
    lines = ["# TYPE kube_pod_container_resource_requests gauge"]
    lines += series(
        "kube_pod_container_resource_requests",
        f'{a}{extra},pod="a1",resource="nvidia_com_gpu"',
        3,
        whole,
    )
    lines += series(
        "kube_pod_container_resource_requests",
        f'{a}{extra},pod="a2",resource="nvidia_com_gpu"',
        1,
        first_hour,
    )
    lines += series(
        "kube_pod_container_resource_requests", f'{a}{extra},pod="a1",resource="cpu"', 8, whole
    )
    lines += series(
        "kube_pod_container_resource_requests",
        f'{b}{extra},pod="b1",resource="nvidia_com_gpu"',
        2,
        whole,
    )
    lines += series(
        "kube_pod_container_resource_requests",
        f'{label}="unmanaged"{extra},pod="x",resource="nvidia_com_gpu"',
        8,
        whole,
    )
    lines.append("# TYPE DCGM_FI_DEV_GPU_UTIL gauge")
    lines += series("DCGM_FI_DEV_GPU_UTIL", f'{a}{extra},gpu="0"', 80, whole)
    lines += series("DCGM_FI_DEV_GPU_UTIL", f'{a}{extra},gpu="1"', 40, whole)
    lines.append("# TYPE DCGM_FI_DEV_FB_USED gauge")
    lines += series("DCGM_FI_DEV_FB_USED", f'{a}{extra},gpu="0"', 1000, whole)
    lines += series("DCGM_FI_DEV_FB_USED", f'{a}{extra},gpu="1"', 500, whole)
    return "\n".join(lines) + "\n# EOF\n"


def at(minutes: int) -> datetime:
    return START + timedelta(minutes=minutes)


@pytest.mark.django_db
def test_query_range_by_namespace_from_a_real_prometheus(
    prometheus_with, cluster, alloc_a, alloc_b
):
    url = prometheus_with(openmetrics())
    source = PrometheusSource.objects.create(cluster=cluster, url=url)
    written = usage_collect_prometheus(source=source, start=at(0), end=at(120))
    # Two managed namespaces × 25 five-minute steps (00:00 to 02:00 inclusive).
    assert written == 50
    samples = {
        (s.team_namespace.name, s.timestamp): s
        for s in UsageSample.objects.select_related("team_namespace")
    }
    a_early, a_late = samples[("team-a-training", at(30))], samples[("team-a-training", at(90))]
    assert (a_early.allocated, a_late.allocated) == (4, 3)  # CPU requests left out
    assert a_early.utilization == 60 and a_early.memory_used_mib == 1500
    b = samples[("team-b-inference", at(30))]
    assert (b.allocated, b.utilization, b.source) == (2, None, "prometheus")

    # Reading an overlapping range again replaces the samples (aligned to the step).
    usage_collect_prometheus(source=source, start=at(58), end=at(121))
    assert UsageSample.objects.count() == 50


@pytest.mark.django_db
def test_namespace_label_is_configurable(prometheus_with, cluster, alloc_a, alloc_b):
    url = prometheus_with(openmetrics(label="exported_namespace"))
    source = PrometheusSource.objects.create(
        cluster=cluster, url=url, namespace_label="exported_namespace"
    )
    usage_collect_prometheus(source=source, start=at(30), end=at(30))
    got = {s.team_namespace.name: s.allocated for s in UsageSample.objects.all()}
    assert got == {"team-a-training": 4, "team-b-inference": 2}


@pytest.mark.django_db
def test_backfill_command_stores_and_rolls_up_the_period(
    prometheus_with, cluster, alloc_a, alloc_b, capsys
):
    url = prometheus_with(openmetrics())
    PrometheusSource.objects.create(cluster=cluster, url=url)
    call_command(
        "collect_usage",
        "--cluster",
        "demo",
        "--from",
        "2025-03-01T00:00:00Z",
        "--to",
        "2025-03-01T02:00:00Z",
    )
    assert "50 samples from Prometheus" in capsys.readouterr().out
    day = UsageDaily.objects.get(team_namespace=alloc_a.team_namespace, day=date(2025, 3, 1))
    assert (day.source, day.peak, day.utilization_mean) == ("prometheus", 4, 60)
    # 25 five-minute samples, each standing 5 minutes: 4 GPUs at 00:00..01:00 (the second pod's
    # last point at 00:59 is still seen at 01:00), 3 GPUs at 01:05..02:00: (13×4 + 12×3) / 12.
    assert day.gpu_hours == Decimal("7.333")


@pytest.mark.django_db
def test_backfill_errors_name_the_option(cluster):
    with pytest.raises(CommandError, match="has no Prometheus configured"):
        call_command(
            "collect_usage", "--cluster", "demo", "--from", "2025-03-01", "--to", "2025-03-02"
        )
    with pytest.raises(CommandError, match="--from: 'yesterday' is not an ISO 8601"):
        call_command(
            "collect_usage", "--cluster", "demo", "--from", "yesterday", "--to", "2025-03-02"
        )
    with pytest.raises(CommandError, match="--cluster: no cluster named 'nope'"):
        call_command("collect_usage", "--cluster", "nope")


@pytest.mark.django_db
def test_unreachable_or_refusing_prometheus_is_a_clear_error(prometheus_with, cluster, alloc_a):
    from tests.support.net import free_port

    down = PrometheusClient(f"http://127.0.0.1:{free_port()}", timeout=2)
    with pytest.raises(PrometheusError, match="ConnectionError"):
        down.query_range("up", start=at(0), end=at(5), step=60)
    url = prometheus_with(openmetrics())
    with pytest.raises(PrometheusError, match="bad_data"):
        PrometheusClient(url).query_range("sum by (", start=at(0), end=at(5), step=60)
    # The beat reports a failing Prometheus and still reads the cluster's pods.
    source = PrometheusSource.objects.create(cluster=cluster, url=f"http://127.0.0.1:{free_port()}")
    result = usage_collect(cluster_id=cluster.pk)
    assert str(result["prometheus"]).startswith("error:")
    source.refresh_from_db()
    assert source.collected_until is None
