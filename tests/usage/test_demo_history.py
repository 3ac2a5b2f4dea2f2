"""The demo's usage history (usage/demo_history.py): the repository's trace replayed onto the
demo cluster at first start, so that usage, suggestions and their backtest show from the first
visit; never twice, never over real samples."""

from datetime import date, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.models import Count, Max, Min

from quotas.models import Allocation, Cluster
from usage import partitions
from usage.demo_history import demo_history_import
from usage.models import Suggestion, SuggestionBacktest, UsageDaily, UsageSample

TODAY = date(2026, 12, 5)


@pytest.fixture
def demo(db) -> Cluster:
    call_command("seed_demo", stdout=StringIO())
    return Cluster.objects.get(name="demo")


@pytest.mark.django_db
def test_the_demo_starts_with_two_months_of_history_suggestions_and_their_backtest(demo):
    history = demo_history_import(cluster=demo, today=TODAY, days=40)
    assert history is not None
    # One namespace of each class of the trace: training, inference and dev.
    assert history.namespaces == ["team-a-training", "team-b-inference", "team-c-dev"]
    assert (history.start, history.end) == (TODAY - timedelta(days=40), TODAY - timedelta(days=1))
    assert history.samples == 40 * 288 * 3
    if connection.vendor == "postgresql":  # in the months' partitions, none in the default
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM quotas_usagesample_default")
            assert cursor.fetchone()[0] == 0
        assert {partitions.month_start(TODAY - timedelta(days=40)), date(2026, 12, 1)} <= {
            p.month for p in partitions.partitions()
        }
    caps = {
        a.team_namespace.name: a.cap
        for a in Allocation.objects.filter(team_namespace__cluster=demo).select_related(
            "team_namespace"
        )
    }
    per_ns = (
        UsageSample.objects.filter(team_namespace__cluster=demo)
        .values("team_namespace__name")
        .annotate(n=Count("*"), first=Min("timestamp"), last=Max("timestamp"), top=Max("allocated"))
    )
    for row in per_ns:
        name = row["team_namespace__name"]
        assert row["n"] == 40 * 288
        # Scaled to the namespace's cap: what ran never exceeds it, and reaches it.
        assert 0 < row["top"] <= caps[name], row
    # Whole GPUs, as pods hold them.
    ran = UsageSample.objects.filter(team_namespace__cluster=demo).values_list(
        "allocated", flat=True
    )
    assert all(value == value.to_integral_value() for value in ran)
    assert UsageDaily.objects.filter(team_namespace__cluster=demo).count() == 40 * 3
    # Last month's suggestions, and their backtest (from the days of October there are).
    november = date(2026, 11, 1)
    assert Suggestion.objects.filter(cluster=demo, month=november).count() == 3
    assert history.suggestions == 3
    policies = set(
        SuggestionBacktest.objects.filter(cluster=demo, month=november).values_list(
            "policy", flat=True
        )
    )
    assert policies == {"suggested", "equal_split", "seed_rule", "hindsight"}
    # The second start finds the samples and changes nothing.
    assert demo_history_import(cluster=demo, today=TODAY, days=40) is None
    assert UsageSample.objects.filter(team_namespace__cluster=demo).count() == history.samples


@pytest.mark.django_db
def test_a_cluster_with_samples_of_its_own_or_no_trace_gets_none(demo, tmp_path):
    assert demo_history_import(cluster=demo, today=TODAY, trace=tmp_path / "missing.csv") is None
    assert not UsageSample.objects.exists()
    other = Cluster.objects.get(name="demo-mig")
    assert demo_history_import(cluster=other, today=TODAY, days=7) is not None
    assert UsageSample.objects.filter(team_namespace__cluster=other).exists()


@pytest.mark.django_db
def test_the_command_names_its_bad_options(demo):
    with pytest.raises(CommandError, match="--cluster: no cluster named 'nope'"):
        call_command("seed_demo_usage", "--cluster", "nope")
    with pytest.raises(CommandError, match="--days: between 7 and 120, not 3"):
        call_command("seed_demo_usage", "--days", "3")
    out = StringIO()
    call_command("seed_demo_usage", "--days", "7", stdout=out)
    assert (
        "samples of the trace for team-a-training, team-b-inference, team-c-dev" in out.getvalue()
    )
    out = StringIO()
    call_command("seed_demo_usage", "--days", "7", stdout=out)
    assert "has usage already" in out.getvalue()


@pytest.fixture
def sandboxed(kube_sandbox, cluster, alloc_a, alloc_b):
    from quotas.kube.client import KubeClient

    Cluster.objects.filter(pk=cluster.pk).update(sandbox_url=kube_sandbox.url)
    cluster.refresh_from_db()
    kube = KubeClient.for_url(kube_sandbox.url)
    for name in ("team-a-training", "team-b-inference"):
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield cluster, kube
    kube.close()


def _held(kube) -> dict[str, int]:
    held: dict[str, int] = {}
    for pod in kube.list("v1", "Pod"):
        ns = pod["metadata"]["namespace"]
        held[ns] = held.get(ns, 0) + 1
    return held


@pytest.mark.django_db
def test_the_demo_work_follows_what_each_namespace_held_a_week_before(
    sandboxed, alloc_a, alloc_b, gpu
):
    from datetime import UTC, datetime

    from usage.demo_history import demo_work_tick

    cluster, kube = sandboxed
    now = datetime(2026, 12, 5, 12, tzinfo=UTC)
    week_ago = now - timedelta(days=7)
    for ns, at, allocated in (
        (alloc_a.team_namespace, week_ago - timedelta(minutes=10), 3),
        (alloc_b.team_namespace, week_ago - timedelta(minutes=5), 9),  # above its cap 6
        (alloc_a.team_namespace, week_ago + timedelta(minutes=30), 1),
    ):
        UsageSample.objects.create(
            team_namespace=ns, resource=gpu, timestamp=at, allocated=allocated, source="csv"
        )
    # Somebody else's pod is never touched.
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "theirs", "namespace": "team-a-training"},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        }
    )
    held = demo_work_tick(cluster=cluster, client=kube, now=now)
    assert held == {
        ("team-a-training", "nvidia.com/gpu"): 3,
        ("team-b-inference", "nvidia.com/gpu"): 6,
    }
    assert _held(kube) == {"team-a-training": 4, "team-b-inference": 6}
    pod = kube.get("v1", "Pod", "team-a-training", "demo-work-1")
    assert pod["status"]["phase"] == "Running"
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    # Half an hour later it holds what it held then: one; the same round twice changes nothing.
    later = now + timedelta(minutes=31)
    for _ in range(2):
        held = demo_work_tick(cluster=cluster, client=kube, now=later)
        assert held[("team-a-training", "nvidia.com/gpu")] == 1
        assert _held(kube)["team-a-training"] == 2  # its one and theirs
    assert kube.get("v1", "Pod", "team-a-training", "theirs") is not None
    assert held[("team-b-inference", "nvidia.com/gpu")] == 6  # its last reading, 36 min before
    # Without a reading in the hour a week before, a namespace holds nothing.
    held = demo_work_tick(cluster=cluster, client=kube, now=now + timedelta(hours=2))
    assert set(held.values()) == {0}
    assert _held(kube) == {"team-a-training": 1}


@pytest.mark.django_db
def test_demo_work_runs_only_on_a_sandbox(demo):
    Cluster.objects.filter(name="demo").update(connection="in_cluster")
    with pytest.raises(CommandError, match="is not a sandbox"):
        call_command("demo_workload", "--once")
