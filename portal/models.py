"""Operational rows of the portal itself (not domain data)."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class WorkerHeartbeat(models.Model):
    """Last sign of life of each Celery worker, written by a periodic task."""

    hostname = models.CharField(max_length=255, unique=True, verbose_name=_("hostname"))
    last_seen = models.DateTimeField(verbose_name=_("last seen"))
    beats = models.PositiveBigIntegerField(default=0, verbose_name=_("beats"))

    class Meta:
        verbose_name = _("worker heartbeat")
        verbose_name_plural = _("worker heartbeats")
        ordering = ["-last_seen"]

    def __str__(self) -> str:
        return f"{self.hostname} @ {self.last_seen:%Y-%m-%d %H:%M:%S}"


class ApiToken(models.Model):
    """A personal API token: ``gqp_<public id>_<secret>``. The public id names the token in
    lists and logs without revealing any of the secret; only the sha256 of the whole token is
    stored, and the token itself is shown once, at creation."""

    PREFIX = "gqp_"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="api_tokens",
        verbose_name=_("user"),
    )
    name = models.CharField(
        max_length=100,
        help_text=_("What the token is for, e.g. ci-pipeline."),
        verbose_name=_("name"),
    )
    # Random and public; NULL (not "": unique) for tokens made before public ids (gqp_ + secret
    # only), which keep working until they expire.
    public_id = models.CharField(  # noqa: DJ001
        max_length=16, unique=True, null=True, editable=False, verbose_name=_("public id")
    )
    token_hash = models.CharField(
        max_length=64, unique=True, editable=False, verbose_name=_("token hash")
    )
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))
    expires_at = models.DateTimeField(verbose_name=_("expires at"))
    last_used_at = models.DateTimeField(
        null=True, blank=True, editable=False, verbose_name=_("last used at")
    )
    revoked_at = models.DateTimeField(null=True, blank=True, verbose_name=_("revoked at"))

    class Meta:
        verbose_name_plural = _("API tokens")
        ordering = ["-created_at"]
        verbose_name = _("API token")

    def __str__(self) -> str:
        return f"{self.name} ({self.label}) of {self.user}"

    @property
    def label(self) -> str:
        """How the token is named to people: its public part, e.g. ``gqp_k3j5q7x2ab``."""
        if self.public_id:
            return f"{self.PREFIX}{self.public_id}"
        return f"old-format token #{self.pk}"


class SsoIdentity(models.Model):
    """Who a user is at the single sign-on provider: the ID token's issuer and subject (``sub``),
    which the provider never reassigns, so a new e-mail address there is still the same user
    here. Written at the first sign-in (portal.sso.services)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="sso_identities",
        verbose_name=_("user"),
    )
    issuer = models.CharField(max_length=255, verbose_name=_("issuer"))
    subject = models.CharField(max_length=255, verbose_name=_("subject"))
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))
    last_login_at = models.DateTimeField(null=True, blank=True, verbose_name=_("last sign-in"))

    class Meta:
        verbose_name = _("single sign-on identity")
        verbose_name_plural = _("single sign-on identities")
        ordering = ["issuer", "subject"]
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"
