"""Import usage history from a CSV file: ``python manage.py import_usage FILE.csv``.

Columns ``timestamp`` (ISO 8601), ``cluster``, ``namespace``, ``resource``, ``allocated`` and
optional ``utilization`` (0-100), ``pending``, ``wait_seconds``. Re-importing a file replaces its
samples. Bad rows are listed with their line number, field and rule; the good ones are kept and
the days they cover are rolled up. Exits 1 when any row was bad. Shows progress on a terminal.
"""

import os
import sys

from django.core.management.base import BaseCommand, CommandError

from usage.csv_import import CsvHeaderError, usage_import_csv


class Command(BaseCommand):
    help = "Import usage samples from a CSV file (streamed, idempotent)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="CSV file, or - for standard input")
        parser.add_argument(
            "--no-rollup", action="store_true", help="do not roll up the imported days"
        )

    def handle(self, *args, **options) -> None:
        path = options["file"]
        if path == "-":
            stream, size = sys.stdin, 0
        else:
            try:
                stream = open(path, encoding="utf-8-sig", newline="")  # noqa: SIM115
            except OSError as exc:
                raise CommandError(f"file: cannot open {path}: {exc.strerror}") from None
            size = os.fstat(stream.fileno()).st_size
        progress = self._progress(size) if self.stdout.isatty() else None
        try:
            result = usage_import_csv(
                stream=stream, rollup=not options["no_rollup"], progress=progress
            )
        except CsvHeaderError as exc:
            raise CommandError(f"{path}: {exc}") from None
        except UnicodeDecodeError as exc:
            raise CommandError(f"{path}: not UTF-8 text ({exc.reason})") from None
        finally:
            if stream is not sys.stdin:
                stream.close()
        if progress:
            self.stdout.write("")
        for error in result.errors:
            self.stderr.write(str(error))
        if result.error_count > len(result.errors):
            self.stderr.write(f"... and {result.error_count - len(result.errors)} more bad rows")
        self.stdout.write(
            f"{result.rows} rows read, {result.imported} samples imported, "
            f"{result.error_count} bad rows"
        )
        if result.error_count:
            raise CommandError(
                f"{result.error_count} bad rows (listed above); the good rows were imported"
            )

    def _progress(self, size: int):
        def show(rows: int, read: int) -> None:
            share = f" {min(100, read * 100 // size)}%" if size else ""
            self.stdout.write(f"\r{rows} rows{share}", ending="")
            self.stdout.flush()

        return show
