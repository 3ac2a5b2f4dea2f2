"""A team told that one of its allocations nears its cap: one open notice per allocation, so
the team hears once when it crosses the line, and again only after it went back below."""

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from quotas.models.fields import amount_field


class CapNotice(models.Model):
    allocation = models.ForeignKey(
        "quotas.Allocation",
        on_delete=models.CASCADE,
        related_name="cap_notices",
        verbose_name=_("allocation"),
    )
    opened_at = models.DateTimeField(verbose_name=_("opened at"))
    # The reading that crossed the line, and the cap it was measured against.
    used = amount_field(_("used"))
    cap = amount_field(_("cap"))
    cleared_at = models.DateTimeField(null=True, blank=True, verbose_name=_("cleared at"))

    class Meta:
        verbose_name = _("cap notice")
        verbose_name_plural = _("cap notices")
        constraints = [
            # Two workers reading the same cluster at once tell the team once.
            models.UniqueConstraint(
                fields=["allocation"],
                condition=Q(cleared_at__isnull=True),
                name="cap_notice_one_open_per_allocation",
            )
        ]

    def __str__(self) -> str:
        return f"{self.allocation_id}: {self.used}/{self.cap} at {self.opened_at:%Y-%m-%d %H:%M}"
