"""Exit 0 when the database and the broker answer, 1 otherwise (container healthchecks)."""

import json

from django.core.management.base import BaseCommand, CommandError

from portal.health import readiness


class Command(BaseCommand):
    help = "Check that the database and the Celery broker are reachable (like GET /readyz)."

    def handle(self, *args, **options) -> None:
        ready, checks = readiness()
        self.stdout.write(json.dumps(checks))
        if not ready:
            raise CommandError("not ready")
