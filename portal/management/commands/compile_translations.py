"""Write the .mo file beside every .po of LOCALE_PATHS, without GNU gettext (polib).

A fresh clone needs no GNU gettext to run the portal in every language: the .mo files are
committed, written by this command (``make messages`` runs it), and a test compiles every .po
again and compares the bytes, so a stale .mo fails CI. Like ``msgfmt``, entries that are
untranslated, fuzzy or obsolete are left out, and so is the header's POT-Creation-Date (it
changes with every makemessages, the translations not): the bytes are a function of the .po's
translations alone.

``--check`` writes nothing and fails when a committed .mo differs from its .po (CI, hooks)."""

from pathlib import Path

import polib
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


def po_files(locale_dirs: list[Path]) -> list[Path]:
    """Every .po under the locale folders (``<lang>/LC_MESSAGES/<domain>.po``), sorted."""
    return sorted(p for d in locale_dirs for p in Path(d).glob("*/LC_MESSAGES/*.po"))


def compile_po(po: Path | str) -> bytes:
    """The .mo bytes of a .po file (a path, or the text itself, as polib takes either); polib's
    OSError on a file it cannot read."""
    catalogue = polib.pofile(str(po))
    catalogue.metadata.pop("POT-Creation-Date", None)
    return catalogue.to_binary()


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
                compiled = compile_po(po)
            except (OSError, ValueError) as exc:
                raise CommandError(f"{po}: {exc}") from None
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
