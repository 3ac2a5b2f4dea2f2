"""Audit events of quota changes (cluster modes, allocations); approvals write theirs here too.

The log is append-only and hash-chained: write it only through ``quotas.audit.chain.audit_record``.
"""

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class AuditEvent(models.Model):
    # Position in the chain: 1, 2, 3, ... with no gaps, given out under the chain head's lock.
    seq = models.PositiveBigIntegerField(unique=True, editable=False, verbose_name=_("seq"))
    # Set by the writer (not auto_now_add) so the hashed timestamp is exactly the stored one.
    created_at = models.DateTimeField(
        default=timezone.now, db_index=True, editable=False, verbose_name=_("created at")
    )
    # No database constraint and no SET NULL: the table refuses UPDATE, and the actor's id must
    # stay as hashed even if the user is deleted later; actor_username keeps who it was.
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("actor"),
    )
    actor_username = models.CharField(
        max_length=150, blank=True, editable=False, verbose_name=_("actor username")
    )
    action = models.CharField(max_length=100, verbose_name=_("action"))
    target_type = models.CharField(max_length=100, verbose_name=_("target type"))
    target_id = models.CharField(max_length=100, verbose_name=_("target id"))
    target_repr = models.CharField(max_length=300, blank=True, verbose_name=_("target repr"))
    before = models.JSONField(null=True, blank=True, verbose_name=_("before"))
    after = models.JSONField(null=True, blank=True, verbose_name=_("after"))
    comment = models.TextField(blank=True, verbose_name=_("comment"))
    prev_hash = models.CharField(max_length=64, editable=False, verbose_name=_("prev hash"))
    hash = models.CharField(
        max_length=64, editable=False, verbose_name=_("hash")
    )  # hex sha256 of the canonical event
    # HMAC-SHA256 of the hash with a key outside the database (AUDIT_MAC_KEY), and which key.
    mac = models.CharField(max_length=64, editable=False, verbose_name=_("mac"))
    mac_key_id = models.CharField(max_length=16, editable=False, verbose_name=_("mac key id"))

    class Meta:
        verbose_name = _("audit event")
        verbose_name_plural = _("audit events")
        ordering = ["-seq"]
        indexes = [models.Index(fields=["target_type", "target_id"], name="audit_target")]

    def __str__(self) -> str:
        when = f"{self.created_at:%Y-%m-%d %H:%M}"
        who = self.actor_username or self.actor_id
        return f"#{self.seq} {self.action} {self.target_repr} by {who} @ {when}"


class AuditChainHead(models.Model):
    """The one row appenders lock to take the next seq; it also records the chain's tip."""

    SINGLETON_ID = 1

    id = models.PositiveSmallIntegerField(
        primary_key=True, default=SINGLETON_ID, editable=False, verbose_name=_("id")
    )
    last_seq = models.PositiveBigIntegerField(default=0, verbose_name=_("last seq"))
    last_hash = models.CharField(max_length=64, verbose_name=_("last hash"))

    class Meta:
        verbose_name_plural = _("audit chain heads")
        verbose_name = _("audit chain head")

    def __str__(self) -> str:
        return f"audit chain head at event {self.last_seq}"
