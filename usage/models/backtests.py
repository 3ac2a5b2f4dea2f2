"""How the suggestions did: per cluster, resource and month, what the plan of each policy
(the method, an equal split, the seed's rule, the best in hindsight), suggested from the month
before, would have made of that month's demand (usage/backtest.py, usage/evaluate.py)."""

from django.db import models
from django.utils.translation import gettext_lazy as _

from quotas.models.fields import amount_field


class SuggestionBacktest(models.Model):
    class Policy(models.TextChoices):
        # The codes of usage.evaluate.POLICIES, in the order the pages show them.
        SUGGESTED = "suggested", _("this method")
        EQUAL_SPLIT = "equal_split", _("equal split")
        SEED_RULE = "seed_rule", _("seed's rule")
        HINDSIGHT = "hindsight", _("best in hindsight")

    cluster = models.ForeignKey(
        "quotas.Cluster",
        on_delete=models.CASCADE,
        related_name="suggestion_backtests",
        verbose_name=_("cluster"),
    )
    # Derived figures: a resource taken out of the catalogue takes them along.
    resource = models.ForeignKey(
        "quotas.Resource",
        on_delete=models.CASCADE,
        related_name="suggestion_backtests",
        verbose_name=_("resource"),
    )
    # First day of the month scored (the plans come from the month before).
    month = models.DateField(verbose_name=_("month"))
    policy = models.CharField(max_length=12, choices=Policy.choices, verbose_name=_("planned by"))
    namespaces = models.PositiveIntegerField(verbose_name=_("namespaces scored"))
    # Unit-hours of the month's demand (allocated + pending) under the policy's plan.
    demand = amount_field(_("demand"))
    covered = amount_field(_("covered by guarantee"))
    borrowed = amount_field(_("borrowed"))
    blocked = amount_field(_("blocked by cap"))
    idle = amount_field(_("idle guaranteed"))
    guaranteed = amount_field(_("guaranteed"))
    # The three mismatches priced as the suggestions price them (relative, not money).
    cost = amount_field(_("cost"))
    # The prices the cost is under (amounts as strings: idle, borrowed, inference_borrowed,
    # blocked), and each namespace's plan ({name: [guarantee, cap]}), for the admin.
    prices = models.JSONField(default=dict, blank=True, verbose_name=_("prices"))
    plans = models.JSONField(default=dict, blank=True, verbose_name=_("plans"))
    computed_at = models.DateTimeField(verbose_name=_("computed at"))

    # The unit-hour figures and the cost, as usage.evaluate.Score names them.
    SCORE_FIELDS = ("demand", "covered", "borrowed", "blocked", "idle", "guaranteed", "cost")

    class Meta:
        verbose_name = _("suggestion backtest")
        verbose_name_plural = _("suggestion backtests")
        ordering = ["-month", "cluster__name", "resource__name", "policy"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "resource", "month", "policy"],
                name="suggestion_backtest_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster} {self.resource} {self.month:%Y-%m} {self.policy}"

    @staticmethod
    def share(part, whole) -> float | None:
        return float(part) / float(whole) if whole else None

    @property
    def covered_share(self) -> float | None:
        return self.share(self.covered, self.demand)

    @property
    def blocked_share(self) -> float | None:
        return self.share(self.blocked, self.demand)

    @property
    def idle_share(self) -> float | None:
        return self.share(self.idle, self.guaranteed)
