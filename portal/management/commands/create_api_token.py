"""Create a personal API token for a user and print it once (it is never shown again)."""

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError

from common.errors import ApplicationError
from portal.tokens import api_token_create


class Command(BaseCommand):
    help = "Create an API token for USERNAME; prints the token once."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", required=True, help="what the token is for")
        parser.add_argument(
            "--days",
            type=int,
            default=None,
            help="expire after N days (default API_TOKEN_DEFAULT_DAYS, at most API_TOKEN_MAX_DAYS)",
        )

    def handle(self, *args, username: str, name: str, days: int | None, **options):
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        if not user.is_active:
            raise CommandError(f"user {username!r} is inactive")
        try:
            row, token = api_token_create(
                user=user, name=name, days=days, comment="manage.py create_api_token"
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stderr.write(
            f"API token {row.name!r} ({row.label}) for {user.username} "
            f"(expires: {row.expires_at.isoformat()}). "
            "Store it now: it cannot be shown again."
        )
        self.stdout.write(token)
