"""Collection entry points for the beat and the management commands: read a cluster's pods and
its Prometheus, back-fill a past period from Prometheus."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.utils import timezone

from quotas.kube.client import KubeError
from quotas.models import Cluster
from usage.cluster import usage_collect_cluster
from usage.models import PrometheusSource
from usage.prometheus import PrometheusError, usage_collect_prometheus
from usage.rollup import RollupResult, usage_rollup

log = logging.getLogger(__name__)

# The first Prometheus reading of a cluster looks back this far.
FIRST_LOOKBACK = timedelta(hours=1)


def usage_collect(*, cluster_id: int, now: datetime | None = None) -> dict[str, int | str]:
    """The beat's reading of one cluster: its pods and queues, then what its Prometheus has
    since the last reading. A source that fails is reported and logged, never raised."""
    now = now or timezone.now()
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return {}
    result: dict[str, int | str] = {}
    try:
        result["cluster"] = usage_collect_cluster(cluster=cluster, now=now)
    except KubeError as exc:
        log.warning("usage of cluster %s unavailable: %s", cluster.name, exc)
        result["cluster"] = f"error: {exc}"
    source = PrometheusSource.objects.filter(cluster=cluster, enabled=True).first()
    if source is not None:
        start = source.collected_until or now - FIRST_LOOKBACK
        try:
            result["prometheus"] = usage_collect_prometheus(source=source, start=start, end=now)
        except PrometheusError as exc:
            log.warning("prometheus of cluster %s unavailable: %s", cluster.name, exc)
            result["prometheus"] = f"error: {exc}"
        else:
            # The last step may still be filling in: read it again next time.
            PrometheusSource.objects.filter(pk=source.pk).update(
                collected_until=now - timedelta(seconds=source.step_seconds)
            )
    return result


def usage_backfill(*, cluster: Cluster, start: datetime, end: datetime) -> tuple[int, RollupResult]:
    """Read a past period from the cluster's Prometheus and roll up its days.
    Raises PrometheusError (also when the cluster has no Prometheus)."""
    if end <= start:
        raise PrometheusError(f"--to {end.isoformat()} is not after --from {start.isoformat()}")
    source = PrometheusSource.objects.filter(cluster=cluster).first()
    if source is None:
        raise PrometheusError(f"cluster {cluster.name} has no Prometheus configured")
    written = usage_collect_prometheus(source=source, start=start, end=end)
    tz = ZoneInfo(settings.TIME_ZONE)
    rollup = usage_rollup(
        start=start.astimezone(tz).date(), end=end.astimezone(tz).date(), cluster_id=cluster.pk
    )
    return written, rollup
