"""Operational rows of the portal itself (not domain data).

IdempotencyKey, also a row of this app, is defined with the code that uses it
(common.api.idempotency) and imported here so the app registers it."""

from django.conf import settings
from django.db import models

from common.api.idempotency import IdempotencyKey  # noqa: F401 - registered with this app


class WorkerHeartbeat(models.Model):
    """Last sign of life of each Celery worker, written by a periodic task."""

    hostname = models.CharField(max_length=255, unique=True)
    last_seen = models.DateTimeField()
    beats = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["-last_seen"]

    def __str__(self) -> str:
        return f"{self.hostname} @ {self.last_seen:%Y-%m-%d %H:%M:%S}"


class ApiToken(models.Model):
    """A personal API token: ``gqp_<public id>_<secret>``. The public id names the token in
    lists and logs without revealing any of the secret; only the sha256 of the whole token is
    stored, and the token itself is shown once, at creation."""

    PREFIX = "gqp_"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, help_text="What the token is for, e.g. ci-pipeline.")
    # Random and public; NULL (not "": unique) for tokens made before public ids (gqp_ + secret
    # only), which keep working until they expire.
    public_id = models.CharField(max_length=16, unique=True, null=True, editable=False)  # noqa: DJ001
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.label}) of {self.user}"

    @property
    def label(self) -> str:
        """How the token is named to people: its public part, e.g. ``gqp_k3j5q7x2ab``."""
        if self.public_id:
            return f"{self.PREFIX}{self.public_id}"
        return f"old-format token #{self.pk}"
