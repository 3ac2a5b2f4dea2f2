"""Recompute the audit log's hash chain and report the first broken link (exit 1 if broken)."""

from django.core.management.base import BaseCommand, CommandError

from quotas.audit import audit_verify


class Command(BaseCommand):
    help = "Verify the audit log's hash chain; exits 1 at the first broken link."

    def handle(self, *args, **options) -> None:
        result = audit_verify()
        if not result.ok:
            # reason reads "event N: what is wrong"
            raise CommandError(f"audit chain BROKEN at {result.reason}", returncode=1)
        self.stdout.write(f"audit chain OK: {result.checked} events")
