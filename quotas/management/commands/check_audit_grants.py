"""Report whether the portal's database role could erase or rewrite the audit log (exit 1 if so)."""

from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from quotas.audit.grants import audit_grants_check


class Command(BaseCommand):
    help = (
        "Connect as the portal's database role and report whether it can TRUNCATE, DELETE or "
        "UPDATE the audit tables (or owns them); exits 1 if it can."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--database", default="default", help="database alias to check")

    def handle(self, *args, **options) -> None:
        report = audit_grants_check(connections[options["database"]])
        if not report.supported:
            self.stdout.write(
                "not PostgreSQL: no roles to check; the append-only triggers, the MAC and the "
                "anchors are the audit log's only guards"
            )
            return
        if report.problems:
            for problem in report.problems:
                self.stderr.write(problem)
            raise CommandError(
                f"role {report.role} can erase or rewrite the audit log: apply "
                "deploy/postgres/audit-grants.sql as the tables' owner",
                returncode=1,
            )
        self.stdout.write(
            f"audit grants OK: role {report.role} can read and append to the audit log only"
        )
