"""Suggestions: the guarantee and cap the portal proposes for a team namespace and resource,
computed from one month of usage, with the figures behind them (see usage/suggest.py)."""

from django.db import models
from django.utils.translation import gettext_lazy as _

from quotas.models.fields import amount_field
from quotas.texts import stored_value


class Suggestion(models.Model):
    class Confidence(models.TextChoices):
        HIGH = "high", _("high")
        MEDIUM = "medium", _("medium")
        LOW = "low", _("low (thin data)")
        NONE = "none", _("none (no usage data)")

    cluster = models.ForeignKey(
        "quotas.Cluster",
        on_delete=models.CASCADE,
        related_name="suggestions",
        verbose_name=_("cluster"),
    )
    team_namespace = models.ForeignKey(
        "quotas.TeamNamespace",
        on_delete=models.CASCADE,
        related_name="suggestions",
        verbose_name=_("team namespace"),
    )
    resource = models.ForeignKey(
        "quotas.Resource",
        on_delete=models.PROTECT,
        related_name="suggestions",
        verbose_name=_("resource"),
    )
    # First day of the month the usage comes from.
    month = models.DateField(verbose_name=_("month"))
    current_guarantee = amount_field(_("current guarantee"))
    current_cap = amount_field(_("current cap"))
    suggested_guarantee = amount_field(_("suggested guarantee"))
    suggested_cap = amount_field(_("suggested cap"))
    confidence = models.CharField(
        max_length=8, choices=Confidence.choices, verbose_name=_("confidence")
    )
    # The numbers behind the suggestion: daily peaks, percentiles, utilization, borrowed and
    # idle GPU-hours, days of data, pending wait (amounts as strings).
    figures = models.JSONField(default=dict, blank=True, verbose_name=_("figures"))
    # Each note as quotas.texts.stored_text keeps it (rendered in the reader's language by
    # localized_notes); rows of before texts were kept hold English strings.
    notes = models.JSONField(default=list, blank=True, verbose_name=_("notes"))
    flags = models.JSONField(default=list, blank=True, verbose_name=_("flags"))
    computed_at = models.DateTimeField(verbose_name=_("computed at"))

    class Meta:
        db_table = "quotas_suggestion"  # made by the quotas app, before usage had its own
        verbose_name = _("suggestion")
        verbose_name_plural = _("suggestions")
        ordering = ["-month", "cluster__name", "team_namespace__name", "resource__name"]
        constraints = [
            models.UniqueConstraint(
                fields=["team_namespace", "resource", "month"],
                name="suggestion_unique_ns_resource_month",
            ),
        ]
        indexes = [models.Index(fields=["cluster", "month"], name="suggestion_cluster_month")]

    def __str__(self) -> str:
        return f"{self.team_namespace} {self.resource} {self.month:%Y-%m}"

    @property
    def localized_notes(self) -> list[str]:
        return [str(stored_value(note)) for note in self.notes or []]

    @property
    def localized_figures(self) -> dict:
        """The figures with the texts among them (the "how") in the reader's language."""
        return {key: stored_value(value) for key, value in (self.figures or {}).items()}

    @property
    def changes(self) -> bool:
        return (
            self.suggested_guarantee != self.current_guarantee
            or self.suggested_cap != self.current_cap
        )
