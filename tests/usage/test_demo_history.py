"""The demo's usage history (usage/demo_history.py): the repository's trace replayed onto the
demo cluster at first start, so that usage, suggestions and their backtest show from the first
visit; never twice, never over real samples."""

from datetime import date, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import Count, Max, Min

from quotas.models import Allocation, Cluster
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
