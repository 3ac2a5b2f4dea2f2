"""Replay Alibaba's openb GPU pod trace as usage CSV for ``import_usage``.

``python manage.py convert_trace tests/data/alibaba-openb-2023/openb_gpu_pods.csv --cluster demo
--start 2025-01-01T00:00:00Z --from-day 110 --days 35 > usage.csv``. How pods map to team
namespaces and GPUs: see ``usage/trace.py``. Nothing is written to the database.
"""

import csv
import sys

from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_datetime

from usage.trace import read_trace, replay, write_replay_csv

DAY = 86_400


class Command(BaseCommand):
    help = "Write the openb GPU pod trace as 5-minute usage CSV (see usage/trace.py)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("trace", help="openb pod list CSV")
        parser.add_argument("--cluster", required=True, help="cluster name written on each row")
        parser.add_argument("--start", required=True, help="time of second 0 (ISO 8601)")
        parser.add_argument("--from-day", type=int, default=0, help="first trace day replayed")
        parser.add_argument("--days", type=int, help="days replayed (default: to the end)")
        parser.add_argument("--prefix", default="trace", help="namespace name prefix")
        parser.add_argument("--teams-per-kind", type=int, default=2)
        parser.add_argument("--step", type=int, default=300, help="seconds between samples")
        parser.add_argument("-o", "--output", help="output file (default: stdout)")

    def handle(self, *args, **options) -> None:
        start = parse_datetime(options["start"])
        if start is None or start.tzinfo is None:
            raise CommandError("--start: give an ISO 8601 time with an offset, e.g. ...T00:00:00Z")
        for name in ("teams_per_kind", "step"):
            if options[name] < 1:
                raise CommandError(f"--{name.replace('_', '-')}: must be at least 1")
        try:
            with open(options["trace"], newline="") as f:
                pods = read_trace(
                    csv.DictReader(f),
                    prefix=options["prefix"],
                    teams_per_kind=options["teams_per_kind"],
                )
        except OSError as exc:
            raise CommandError(f"trace: cannot read {options['trace']}: {exc.strerror}") from None
        except (KeyError, ValueError) as exc:
            raise CommandError(f"trace: not an openb pod list ({exc})") from None
        first = options["from_day"] * DAY
        last = first + options["days"] * DAY - 1 if options["days"] else None
        rows = replay(
            pods,
            cluster=options["cluster"],
            start=start,
            step=options["step"],
            first_second=first,
            last_second=last,
        )
        if options["output"]:
            with open(options["output"], "w", newline="") as out:
                n = write_replay_csv(out, rows)
            self.stderr.write(f"{n} rows written to {options['output']}")
        else:
            write_replay_csv(sys.stdout, rows)
