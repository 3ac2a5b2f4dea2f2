"""The backtest in the product (usage/backtest.py): suggested from one month, scored on the
next beside an equal split, the seed's rule and the best plan in hindsight, stored per cluster,
resource, month and policy; the monthly task, and evaluate_suggestions --cluster walking over
every month of a cluster's data. Synthetic months with known answers (hourly samples)."""

from datetime import date, timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from quotas.models import Team, TeamNamespace
from quotas.services import allocation_set
from tests.support.usage import JULY, JUNE, MAY, flat, hourly_samples
from usage.backtest import backtest_compute, backtest_walk, months_with_demand
from usage.evaluate import POLICIES
from usage.models import Suggestion, SuggestionBacktest, UsageDaily, UsageSample
from usage.suggestions import month_end, previous_month
from usage.tasks import compute_cluster_backtest, compute_suggestions

pytestmark = pytest.mark.django_db
D = Decimal
HOURS = 30 * 24  # June
DAY = timedelta(days=1)


def _rows(cluster, month=JUNE) -> dict[str, SuggestionBacktest]:
    return {r.policy: r for r in SuggestionBacktest.objects.filter(cluster=cluster, month=month)}


def test_a_flat_namespace_is_covered_whole_with_nothing_blocked_or_idle(cluster, alloc_a, gpu):
    hourly_samples(alloc_a.team_namespace, gpu, MAY, JULY, flat(3))
    assert backtest_compute(cluster=cluster, month=JUNE) == len(POLICIES)
    suggested = _rows(cluster)["suggested"]
    # Guaranteed what it always uses (3 of the 6 in force), its cap above it within 50% of 16.
    guarantee, cap = (D(v) for v in suggested.plans["team-a-training"])
    assert guarantee == 3 and 3 <= cap <= 8
    assert suggested.namespaces == 1 and suggested.demand == 3 * HOURS
    assert suggested.covered == suggested.demand and suggested.covered_share == 1
    assert suggested.blocked == 0 and suggested.idle == 0 and suggested.cost == 0
    assert suggested.prices == {
        "idle": "1",
        "borrowed": "0.5",
        "inference_borrowed": "2",
        "blocked": "4",
    }


def test_every_policy_by_hand_and_hindsight_never_worse_than_any(cluster, backtest_months):
    assert backtest_compute(cluster=cluster, month=JUNE) == 4
    rows = _rows(cluster)
    assert set(rows) == set(POLICIES)
    demand = 3 * HOURS + 8 * 6 * 30  # steady 3; 8 for six hours a day
    assert {r.demand for r in rows.values()} == {demand}
    # The method guarantees the steady namespace what it uses and lets the bursty inference
    # one borrow: a guaranteed GPU it holds idle 18 hours a day costs more than the borrowing
    # it would save (1 x 3/4 against 2 x 1/4 of the hours).
    suggested = rows["suggested"]
    assert suggested.plans["team-a-training"][0] == "3"
    assert suggested.plans["team-b-inference"] == ["0", "8"]
    assert suggested.idle == 0 and suggested.blocked == 0
    assert suggested.covered == 3 * HOURS and suggested.cost == 2 * 8 * 6 * 30
    # An equal split: 8 each, most of it idle; the seed's rule: 3/3 and 7/8.
    equal = rows["equal_split"]
    assert equal.plans == {"team-a-training": ["8", "8"], "team-b-inference": ["8", "8"]}
    assert equal.covered == demand and equal.idle == 16 * HOURS - demand == equal.cost
    seed = rows["seed_rule"]
    assert seed.plans == {"team-a-training": ["3", "3"], "team-b-inference": ["7", "8"]}
    assert seed.idle == 7 * 18 * 30 and seed.borrowed == 1 * 6 * 30
    assert seed.cost == seed.idle + 2 * seed.borrowed
    # Hindsight: caps at the month's highest demand, guarantees by the method's own code.
    hindsight = rows["hindsight"]
    assert hindsight.plans == {"team-a-training": ["3", "3"], "team-b-inference": ["0", "8"]}
    assert all(hindsight.cost <= r.cost for r in rows.values())
    assert hindsight.cost == suggested.cost  # the month repeats the one before


def test_running_twice_stores_the_same_rows(cluster, backtest_months):
    fields = ["policy", "namespaces", "demand", "covered", "blocked", "idle", "cost", "plans"]
    backtest_compute(cluster=cluster, month=JUNE)
    first = list(SuggestionBacktest.objects.order_by("policy").values("id", *fields))
    assert backtest_compute(cluster=cluster, month=date(2025, 6, 17)) == 4  # any day of June
    assert list(SuggestionBacktest.objects.order_by("policy").values("id", *fields)) == first
    # A resource no longer scored keeps no rows of the month.
    cluster.capacities.update(capacity=0)
    assert backtest_compute(cluster=cluster, month=JUNE) == 0
    assert not SuggestionBacktest.objects.exists()


def test_a_new_namespace_is_planned_with_the_values_in_force(cluster, backtest_months, gpu, admin):
    team_c = Team.objects.create(slug="team-c", name="Team C")
    ns_c = TeamNamespace.objects.create(team=team_c, cluster=cluster, name="team-c-dev")
    allocation_set(team_namespace=ns_c, resource=gpu, guarantee=2, cap=4, acting_user=admin)
    hourly_samples(ns_c, gpu, JUNE, JULY, flat(1))  # no history in May
    backtest_compute(cluster=cluster, month=JUNE)
    rows = _rows(cluster)
    assert {r.namespaces for r in rows.values()} == {3}
    # No data to suggest from: the method keeps 2/4 (the seed's rule too); hindsight knows.
    assert rows["suggested"].plans["team-c-dev"] == ["2", "4"]
    assert rows["seed_rule"].plans["team-c-dev"] == ["2", "4"]
    assert rows["hindsight"].plans["team-c-dev"] == ["1", "1"]
    assert all(rows["hindsight"].cost <= r.cost for r in rows.values())


def test_the_walk_scores_every_month_with_samples_before_it(cluster, backtest_months):
    assert months_with_demand(cluster=cluster) == [MAY, JUNE]
    # May has no month with samples before it; July has none of its own.
    assert backtest_walk(cluster=cluster) == [JUNE]
    assert set(SuggestionBacktest.objects.values_list("month", flat=True)) == {JUNE}
    # A month not over yet is not scored.
    assert backtest_walk(cluster=cluster, today=date(2025, 6, 30)) == []
    # The rollups keep each day's demand: pruning the samples loses no month, until the
    # rollups are ones from before the counts were kept.
    scored = _rows(cluster)
    UsageSample.objects.all().delete()
    assert months_with_demand(cluster=cluster) == [MAY, JUNE]
    backtest_compute(cluster=cluster, month=JUNE)
    assert {p: (r.cost, r.plans) for p, r in _rows(cluster).items()} == {
        p: (r.cost, r.plans) for p, r in scored.items()
    }
    UsageDaily.objects.filter(day__lt=JUNE).update(demand_counts=None)
    assert months_with_demand(cluster=cluster) == [JUNE]


def test_the_monthly_task_backtests_last_month_of_one_cluster(cluster, backtest_months):
    assert compute_cluster_backtest(cluster.pk, "2025-06") == 4
    assert compute_cluster_backtest(10_000) == 0


def test_the_monthly_beat_job_backtests_last_month_beside_the_suggestions(
    cluster, alloc_a, gpu, eager
):
    last = previous_month(timezone.localdate())
    hourly_samples(
        alloc_a.team_namespace, gpu, previous_month(last), month_end(last) + DAY, flat(2)
    )
    assert compute_suggestions() == [cluster.pk]
    assert set(Suggestion.objects.values_list("month", flat=True)) == {last}
    assert SuggestionBacktest.objects.filter(cluster=cluster, month=last).count() == 4


def test_the_command_walks_a_clusters_months_and_stores_them(cluster, backtest_months):
    out = StringIO()
    call_command("evaluate_suggestions", "--cluster", "demo", stdout=out)
    text = out.getvalue()
    assert "demo: 1 month(s) backtested and stored, 2025-06 to 2025-06" in text
    assert "2025-06 nvidia.com/gpu" in text and "all months nvidia.com/gpu" in text
    assert "| policy | demand (GPU-hours) |" in text
    for name in ("| suggested |", "| equal split |", "| seed rule |", "| best in hindsight |"):
        assert name in text
    assert SuggestionBacktest.objects.filter(cluster=cluster, month=JUNE).count() == 4
    with pytest.raises(CommandError, match="--cluster: no cluster named 'nope'"):
        call_command("evaluate_suggestions", "--cluster", "nope")


def test_the_command_says_when_there_is_nothing_to_walk(cluster):
    out = StringIO()
    call_command("evaluate_suggestions", "--cluster", "demo", stdout=out)
    assert "nothing to backtest" in out.getvalue()
    assert not SuggestionBacktest.objects.exists()
