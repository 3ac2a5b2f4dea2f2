"""The backtest of the suggestions on a cluster's own data: suggested from one month, scored on
the next, beside an equal split, the seed's rule and the best plan in hindsight
(``usage/evaluate.py``), per resource of the cluster with a capacity. Stored per cluster,
resource, month and policy (``SuggestionBacktest``) for ``/suggestions/`` and the API; the
monthly beat job computes last month's, ``evaluate_suggestions --cluster`` every month.

The suggestion is made from the items the monthly job makes it from
(``usage/suggestions.suggestion_items``: the month's daily rollups and 5-minute demand of every
namespace and resource), under the cluster's share rule and prices, with the values in force
when the scored month began as the current ones. Months are calendar months in ``TIME_ZONE``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from common.amounts import format_amount
from quotas.models import Cluster, ClusterCapacity, Resource
from usage.evaluate import (
    EQUAL_SPLIT,
    HINDSIGHT,
    POLICIES,
    SEED_RULE,
    SUGGESTED,
    Plan,
    Score,
    plan_equal_split,
    plan_hindsight,
    plan_seed_rule,
    plan_suggested,
    score_plan,
)
from usage.forecast import Distribution, Prices
from usage.models import SuggestionBacktest, UsageDaily, UsageSample
from usage.selectors import demand_history_for
from usage.suggest import WHOLE_UNIT_KINDS, Period
from usage.suggestions import month_end, previous_month, suggestion_items


@dataclass(frozen=True)
class ResourceBacktest:
    """One resource of a cluster over one scored period: each policy's plan and score."""

    resource: Resource
    plans: dict[str, dict[str, Plan]]
    scores: dict[str, Score]


def local_midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=ZoneInfo(settings.TIME_ZONE))


def backtest_period(
    *, cluster: Cluster, train: tuple[date, date], scored: tuple[date, date]
) -> list[ResourceBacktest]:
    """Every policy planned from the days ``train`` (first, last) and scored on the demand of
    the days ``scored`` (first, last), per resource of the cluster with a capacity and demand
    in the scored days. Namespaces planned: those with an allocation, or with usage in either
    period (one new in the scored period is planned with no history: the method keeps its
    values in force)."""
    capacities = {
        c.resource_id: c
        for c in ClusterCapacity.objects.filter(cluster=cluster, capacity__gt=0).select_related(
            "resource"
        )
    }
    if not capacities:
        return []
    train_start, train_end = train
    scored_start, scored_end = scored
    scored_demand = demand_history_for(cluster=cluster, start=scored_start, end=scored_end)
    found = suggestion_items(
        cluster=cluster,
        start=train_start,
        last=train_end,
        at=local_midnight(scored_start),
        more=scored_demand,
    )
    prices = Prices.of_cluster(cluster)
    share = cluster.effective_max_cap_share
    period = Period(start=train_start, end=train_end, today=scored_start)
    results = []
    for resource_id, row in sorted(capacities.items(), key=lambda kv: kv[1].resource.name):
        resource, capacity = row.resource, row.capacity
        mine = [(pair, item) for pair, item in found if pair[1] == resource_id]
        demand = {
            item.namespace: Distribution.of_days(scored_demand[pair])
            for pair, item in mine
            if pair in scored_demand
        }
        if not demand:
            continue
        classes = {item.namespace: item.workload_class for _, item in mine}
        items = [item for _, item in mine]
        plans = {
            SUGGESTED: plan_suggested(
                items,
                capacity=capacity,
                max_cap_share=share,
                period=period,
                prices=prices,
                cluster=cluster.name,
            ),
            EQUAL_SPLIT: plan_equal_split(items, capacity=capacity, max_cap_share=share),
            SEED_RULE: plan_seed_rule(items, capacity=capacity, max_cap_share=share),
            HINDSIGHT: plan_hindsight(
                demand,
                capacity=capacity,
                max_cap_share=share,
                prices=prices,
                classes=classes,
                whole=resource.kind in WHOLE_UNIT_KINDS,
            ),
        }
        scores = {p: score_plan(plans[p], demand, prices=prices, classes=classes) for p in POLICIES}
        results.append(ResourceBacktest(resource=resource, plans=plans, scores=scores))
    return results


def _amount(value: float) -> Decimal:
    """Unit-hours as stored (3 places; a float's -0.000000001 is 0)."""
    return Decimal(str(round(max(value, 0.0), 3)))


def _prices_json(prices: Prices) -> dict[str, str]:
    return {
        "idle": format_amount(prices.idle),
        "borrowed": format_amount(prices.borrowed),
        "inference_borrowed": format_amount(prices.inference_borrowed),
        "blocked": format_amount(prices.blocked),
    }


def backtest_compute(*, cluster: Cluster, month: date) -> int:
    """Suggest from the month before ``month``, score ``month`` (every policy, every resource
    of the cluster with a capacity and demand that month) and store one row per resource and
    policy, replacing that month's earlier rows of the cluster. Returns how many were stored.
    Safe to run twice or at the same time: one upsert."""
    start = month.replace(day=1)
    results = backtest_period(
        cluster=cluster,
        train=(previous_month(start), start - timedelta(days=1)),
        scored=(start, month_end(start)),
    )
    now = timezone.now()
    prices = _prices_json(Prices.of_cluster(cluster))
    rows = [
        SuggestionBacktest(
            cluster=cluster,
            resource=result.resource,
            month=start,
            policy=policy,
            namespaces=score.namespaces,
            **{name: _amount(getattr(score, name)) for name in SuggestionBacktest.SCORE_FIELDS},
            prices=prices,
            plans={
                ns: [format_amount(plan.guarantee), format_amount(plan.cap)]
                for ns, plan in result.plans[policy].items()
            },
            computed_at=now,
        )
        for result in results
        for policy, score in result.scores.items()
    ]
    with transaction.atomic():
        if rows:
            SuggestionBacktest.objects.bulk_create(
                rows,
                update_conflicts=True,
                unique_fields=["cluster", "resource", "month", "policy"],
                update_fields=[
                    "namespaces",
                    *SuggestionBacktest.SCORE_FIELDS,
                    "prices",
                    "plans",
                    "computed_at",
                ],
            )
        # A resource no longer scored (its capacity or its demand gone) keeps no old rows.
        SuggestionBacktest.objects.filter(
            cluster=cluster, month=start, computed_at__lt=now
        ).delete()
    return len(rows)


def months_with_demand(*, cluster: Cluster) -> list[date]:
    """First days of the months with 5-minute demand of the cluster, oldest first: the months
    whose daily rollups keep the day's demand counts (kept for good), and those of rollups
    from before the counts were kept whose samples are not pruned yet."""
    daily = UsageDaily.objects.filter(team_namespace__cluster=cluster)
    counted = set(daily.filter(demand_counts__isnull=False).dates("day", "month"))
    return [
        m
        for m in daily.dates("day", "month")
        if m in counted
        or UsageSample.objects.filter(
            team_namespace__cluster=cluster,
            timestamp__gte=local_midnight(m),
            timestamp__lt=local_midnight(month_end(m) + timedelta(days=1)),
        ).exists()
    ]


def backtest_walk(*, cluster: Cluster, today: date | None = None) -> list[date]:
    """The backtest of every month of the cluster that is over and has demand, as has the
    month before it, oldest first. Returns the months computed."""
    today = today or timezone.localdate()
    months = months_with_demand(cluster=cluster)
    have = set(months)
    walked = [m for m in months if previous_month(m) in have and month_end(m) < today]
    for m in walked:
        backtest_compute(cluster=cluster, month=m)
    return walked
