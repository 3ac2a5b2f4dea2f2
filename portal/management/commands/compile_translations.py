"""Write the .mo file beside every .po of LOCALE_PATHS, without GNU gettext (portal.i18n_compile).

``--check`` writes nothing and fails when a committed .mo differs from its .po (CI, hooks)."""

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from portal.i18n_compile import PoSyntaxError, compile_file, po_files


class Command(BaseCommand):
    help = "Compile every .po of LOCALE_PATHS into its .mo, in pure Python (no msgfmt needed)."
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument(
            "--check",
            action="store_true",
            help="write nothing; fail if a .mo is missing or differs from its compiled .po",
        )

    def handle(self, *args, check: bool = False, **options):
        files = po_files([Path(p) for p in settings.LOCALE_PATHS])
        if not files:
            raise CommandError(f"no .po files under {settings.LOCALE_PATHS}")
        stale = []
        for po in files:
            try:
                compiled = compile_file(po)
            except PoSyntaxError as exc:
                raise CommandError(str(exc)) from None
            mo = po.with_suffix(".mo")
            current = mo.read_bytes() if mo.exists() else None
            if current == compiled:
                self.stdout.write(f"{mo}: up to date")
            elif check:
                stale.append(str(mo))
            else:
                mo.write_bytes(compiled)
                self.stdout.write(f"{mo}: written")
        if stale:
            raise CommandError(
                f"stale or missing: {', '.join(stale)} (run `manage.py compile_translations`)"
            )
