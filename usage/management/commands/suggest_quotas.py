"""``python manage.py suggest_quotas --cluster NAME --month YYYY-MM``: compute (again) the
suggestions of one cluster from one month of usage; ``--month`` defaults to last month."""

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from common.amounts import format_amount
from common.dates import parse_month
from common.errors import ValidationFailed
from quotas.models import Cluster
from usage.models import Suggestion
from usage.suggestions import previous_month, suggestions_compute


class Command(BaseCommand):
    help = "Suggest guarantee and cap of every team namespace of a cluster from a month of usage."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--cluster", required=True, help="cluster name")
        parser.add_argument("--month", help="YYYY-MM (default: last month)")

    def handle(self, *args, **options) -> None:
        cluster = Cluster.objects.filter(name=options["cluster"]).first()
        if cluster is None:
            raise CommandError(f"--cluster: no cluster named {options['cluster']!r}")
        try:
            month = (
                parse_month(options["month"], field="--month")
                if options["month"]
                else previous_month(timezone.localdate())
            )
        except ValidationFailed as exc:
            raise CommandError(exc.message) from None
        count = suggestions_compute(cluster=cluster, month=month)
        rows = Suggestion.objects.filter(cluster=cluster, month=month).select_related(
            "team_namespace", "resource"
        )
        for s in rows.order_by("team_namespace__name", "resource__name"):
            self.stdout.write(
                f"{s.team_namespace.name:30} {s.resource.name:24} "
                f"{format_amount(s.current_guarantee)}/{format_amount(s.current_cap)} -> "
                f"{format_amount(s.suggested_guarantee)}/{format_amount(s.suggested_cap)}  "
                f"{s.confidence}" + (f"  [{', '.join(s.flags)}]" if s.flags else "")
            )
        self.stderr.write(f"{count} suggestions for {cluster.name} {month:%Y-%m}")
