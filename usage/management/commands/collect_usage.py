"""Read usage now, or back-fill a past period from a cluster's Prometheus.

``python manage.py collect_usage --cluster NAME`` reads the cluster's pods (and its Prometheus)
once, as the beat does. ``--from 2025-03-01 --to 2025-04-01`` back-fills that period from the
cluster's Prometheus (times in ISO 8601; a date is midnight in TIME_ZONE) and rolls up its days.
"""

from datetime import datetime, time
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_datetime

from common.dates import day_or_none
from quotas.models import Cluster
from usage.collect import usage_backfill, usage_collect
from usage.prometheus import PrometheusError


def parse_when(value: str, option: str) -> datetime:
    try:
        when = parse_datetime(value)
    except ValueError:  # well formed, but no such day or time
        when = None
    if when is None:
        day = day_or_none(value)
        if day is None:
            raise CommandError(f"{option}: {value!r} is not an ISO 8601 date or time")
        when = datetime.combine(day, time.min)
    if when.tzinfo is None:
        when = when.replace(tzinfo=ZoneInfo(settings.TIME_ZONE))
    return when


class Command(BaseCommand):
    help = "Read usage of a cluster now, or back-fill a past period from its Prometheus."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--cluster", required=True, help="name of the cluster")
        parser.add_argument("--from", dest="start", help="back-fill from (ISO 8601)")
        parser.add_argument("--to", dest="end", help="back-fill until (ISO 8601)")

    def handle(self, *args, **options) -> None:
        cluster = Cluster.objects.filter(name=options["cluster"]).first()
        if cluster is None:
            raise CommandError(f"--cluster: no cluster named {options['cluster']!r}")
        if bool(options["start"]) != bool(options["end"]):
            raise CommandError("--from and --to go together (a back-fill needs both)")
        if not options["start"]:
            result = usage_collect(cluster_id=cluster.pk)
            for source, outcome in result.items():
                self.stdout.write(f"{cluster.name} {source}: {outcome}")
            return
        start = parse_when(options["start"], "--from")
        end = parse_when(options["end"], "--to")
        try:
            written, rollup = usage_backfill(cluster=cluster, start=start, end=end)
        except PrometheusError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"{cluster.name}: {written} samples from Prometheus, "
            f"{rollup.days} daily rollups {rollup.start}..{rollup.end}"
        )
