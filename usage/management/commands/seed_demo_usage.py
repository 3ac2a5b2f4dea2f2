"""``python manage.py seed_demo_usage [--cluster demo] [--days 61]``: give the demo cluster its
usage history from the trace the repository carries (``usage/demo_history.py``), then last
month's suggestions and backtest. ``make run`` calls it after ``seed_demo``; a cluster that has
samples already is left alone."""

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from quotas.models import Cluster
from usage.demo_history import demo_history_import


class Command(BaseCommand):
    help = "Replay the repository's GPU trace onto the demo cluster as its usage history."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--cluster", default="demo", help="cluster name (default: demo)")
        parser.add_argument("--days", type=int, default=61, help="days of history (7-120)")

    def handle(self, *args, **options) -> None:
        cluster = Cluster.objects.filter(name=options["cluster"]).first()
        if cluster is None:
            raise CommandError(f"--cluster: no cluster named {options['cluster']!r}")
        if not 7 <= options["days"] <= 120:
            raise CommandError(f"--days: between 7 and 120, not {options['days']}")
        history = demo_history_import(
            cluster=cluster, today=timezone.localdate(), days=options["days"]
        )
        if history is None:
            self.stdout.write(f"{cluster.name}: has usage already (or no trace): left as it is")
            return
        self.stdout.write(
            f"{cluster.name}: {history.samples:,} samples of the trace for "
            f"{', '.join(history.namespaces)}, {history.start} to {history.end}; "
            f"{history.suggestions} suggestions and {history.backtests} backtest rows"
        )
