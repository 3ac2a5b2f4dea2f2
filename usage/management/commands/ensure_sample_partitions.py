"""``python manage.py ensure_sample_partitions [--from YYYY-MM] [--months-ahead N]``: make the
usage samples' month partitions (PostgreSQL) from last month, or ``--from``'s month when
earlier, to N months ahead (3), as the beat does daily. For deployments whose application role
may not make tables: run it as the owner role, after each migrate and monthly; samples of a
month made late move into it from the default partition. Does nothing on SQLite."""

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from common.dates import parse_month
from common.errors import ValidationFailed
from usage.partitions import (
    PARTITION_MONTHS_AHEAD,
    ensure_months,
    kept_months,
    missing_months,
    partition_name,
    partitioned,
)


class Command(BaseCommand):
    help = "Make the usage samples' month partitions (PostgreSQL), as the tables' owner."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--from", dest="since", help="first month, YYYY-MM (last month)")
        parser.add_argument(
            "--months-ahead",
            type=int,
            default=PARTITION_MONTHS_AHEAD,
            help=f"months after this one to make, 0 to 24 ({PARTITION_MONTHS_AHEAD})",
        )

    def handle(self, *args, **options) -> None:
        if not partitioned():
            self.stdout.write("the samples are not partitioned here (SQLite): nothing to do")
            return
        ahead = options["months_ahead"]
        if not 0 <= ahead <= 24:
            raise CommandError(f"--months-ahead: from 0 to 24, got {ahead}")
        try:
            since = parse_month(options["since"], field="--from") if options["since"] else None
        except ValidationFailed as exc:
            raise CommandError(exc.message) from None
        first, last = kept_months(today=timezone.now().date(), months_ahead=ahead, since=since)
        for name in ensure_months(first, last):
            self.stdout.write(f"made {name}")
        if missing := missing_months(first, last):
            raise CommandError(
                f"not made: {', '.join(partition_name(m) for m in missing)}; this database "
                "role may not make tables (run it as the role that owns the samples table, "
                "the one that migrates)"
            )
        self.stdout.write(f"every month from {first:%Y-%m} to {last:%Y-%m} has its partition")
