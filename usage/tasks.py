"""Celery tasks of usage: reading usage, rolling it up, the monthly suggestions and their
backtest.

The older ones keep the ``quotas.`` prefix they had when the quotas app held usage: the beat
schedule's rows and messages already queued name them so. Newer ones are named ``usage.``."""

from celery import shared_task
from django.utils import timezone

from common.dates import parse_month
from quotas.models import Cluster
from usage.backtest import backtest_compute
from usage.collect import usage_collect
from usage.partitions import ensure_ahead
from usage.rollup import usage_rollup_recent
from usage.suggestions import previous_month, suggestions_compute

# --- usage ------------------------------------------------------------------------------------


@shared_task(name="quotas.collect_usage", ignore_result=True)
def collect_usage() -> list[int]:
    """Fan out one usage reading per cluster, so a slow cluster delays no other."""
    ids = list(Cluster.objects.values_list("id", flat=True))
    for cluster_id in ids:
        collect_cluster_usage.delay(cluster_id)
    return ids


@shared_task(name="quotas.collect_cluster_usage", ignore_result=True, acks_late=True)
def collect_cluster_usage(cluster_id: int) -> None:
    """One cluster's pods and queues, then its Prometheus when it has one; failures are logged
    (the next reading comes in USAGE_COLLECT_SECONDS)."""
    usage_collect(cluster_id=cluster_id)


@shared_task(name="quotas.rollup_usage", ignore_result=True)
def rollup_usage() -> int:
    """Roll up yesterday and today, and prune raw samples past the retention."""
    return usage_rollup_recent().days


@shared_task(name="usage.ensure_sample_partitions", ignore_result=True)
def ensure_sample_partitions() -> list[str]:
    """PostgreSQL: the samples' month partitions from last month to a few months ahead, so
    the collector's samples always land in their month (nothing to do on SQLite)."""
    return ensure_ahead(today=timezone.now().date())


# --- suggestions ------------------------------------------------------------------------------


@shared_task(name="quotas.compute_suggestions", ignore_result=True)
def compute_suggestions() -> list[int]:
    """Monthly: one suggestion run per cluster for last month's usage, and one backtest per
    cluster of last month (how the suggestions from the month before did)."""
    ids = list(Cluster.objects.values_list("id", flat=True))
    for cluster_id in ids:
        compute_cluster_suggestions.delay(cluster_id)
        compute_cluster_backtest.delay(cluster_id)
    return ids


@shared_task(name="quotas.compute_cluster_suggestions", ignore_result=True, acks_late=True)
def compute_cluster_suggestions(cluster_id: int, month: str | None = None) -> int:
    """Suggestions of one cluster for ``month`` (YYYY-MM; default last month). An upsert:
    running it twice stores the same rows."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return 0
    when = parse_month(month) if month else previous_month(timezone.localdate())
    return suggestions_compute(cluster=cluster, month=when)


@shared_task(name="usage.compute_cluster_backtest", ignore_result=True, acks_late=True)
def compute_cluster_backtest(cluster_id: int, month: str | None = None) -> int:
    """The backtest of one cluster for ``month`` (YYYY-MM; default last month): suggested from
    the month before, scored on it. An upsert: running it twice stores the same rows."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return 0
    when = parse_month(month) if month else previous_month(timezone.localdate())
    return backtest_compute(cluster=cluster, month=when)
