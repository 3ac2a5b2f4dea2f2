"""Allocations: a team namespace's entitlement to one resource, with every version kept."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from common.amounts import format_amount
from quotas.models.fields import ZERO, amount_field


def _amount_constraints(prefix: str) -> list[models.BaseConstraint]:
    """What must never be stored, for the current row and for every kept version alike."""
    return [
        models.CheckConstraint(
            condition=Q(guarantee__gte=ZERO),
            name=f"{prefix}_guarantee_gte_0",
            violation_error_message="guarantee must not be negative",
        ),
        models.CheckConstraint(
            condition=Q(cap__gte=ZERO),
            name=f"{prefix}_cap_gte_0",
            violation_error_message="cap must not be negative",
        ),
        models.CheckConstraint(
            condition=Q(guarantee__lte=F("cap")),
            name=f"{prefix}_guarantee_lte_cap",
            violation_error_message="guarantee must not exceed cap (guarantee ≤ cap)",
        ),
        models.CheckConstraint(
            condition=Q(per_pod_max__isnull=True)
            | (Q(per_pod_max__gt=ZERO) & Q(per_pod_max__lte=F("cap"))),
            name=f"{prefix}_per_pod_max_in_0_cap",
            violation_error_message="per-pod max must be positive and not exceed cap",
        ),
    ]


class AllocationValues(models.Model):
    guarantee = amount_field(_("guarantee"), help_text=_("Floor that is always available."))
    cap = amount_field(
        _("cap"), help_text=_("Hard ceiling; borrows up to it when others are idle.")
    )
    per_pod_max = amount_field(_("per-pod max"), null=True, blank=True)
    priority_classes = models.JSONField(
        default=list,
        blank=True,
        help_text=_("Names of the PriorityClasses pods may use."),
        verbose_name=_("priority classes"),
    )

    class Meta:
        abstract = True


class Allocation(AllocationValues):
    """The current entitlement; every change also writes an AllocationVersion."""

    team_namespace = models.ForeignKey(
        "quotas.TeamNamespace",
        on_delete=models.CASCADE,
        related_name="allocations",
        verbose_name=_("team namespace"),
    )
    resource = models.ForeignKey(
        "quotas.Resource",
        on_delete=models.PROTECT,
        related_name="allocations",
        verbose_name=_("resource"),
    )
    version = models.PositiveIntegerField(default=1, verbose_name=_("version"))
    updated_at = models.DateTimeField(auto_now=True, verbose_name=_("updated at"))
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("updated by"),
    )

    class Meta:
        verbose_name = _("allocation")
        verbose_name_plural = _("allocations")
        ordering = ["team_namespace__cluster__name", "team_namespace__name", "resource__name"]
        constraints = [
            models.UniqueConstraint(
                fields=["team_namespace", "resource"], name="allocation_unique_namespace_resource"
            ),
            *_amount_constraints("allocation"),
        ]

    def __str__(self) -> str:
        guarantee, cap = format_amount(self.guarantee), format_amount(self.cap)
        return f"{self.team_namespace} {self.resource}: {guarantee}/{cap}"

    def clean(self) -> None:
        super().clean()
        if self.resource_id is None:
            return
        errors = self.resource.whole_number_errors(
            {"guarantee": self.guarantee, "cap": self.cap, "per_pod_max": self.per_pod_max}
        )
        if errors:
            raise ValidationError(errors)


class AllocationVersion(AllocationValues):
    """One kept state of an allocation: who changed it, when and why."""

    allocation = models.ForeignKey(
        Allocation, on_delete=models.CASCADE, related_name="versions", verbose_name=_("allocation")
    )
    version = models.PositiveIntegerField(verbose_name=_("version"))
    changed_at = models.DateTimeField(auto_now_add=True, verbose_name=_("changed at"))
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("changed by"),
    )
    reason = models.TextField(blank=True, verbose_name=_("reason"))
    # Where the change came from, e.g. "request:42", "seed_demo", "django-admin".
    source = models.CharField(max_length=100, blank=True, verbose_name=_("source"))

    class Meta:
        verbose_name = _("allocation version")
        verbose_name_plural = _("allocation versions")
        ordering = ["allocation", "-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["allocation", "version"], name="allocation_version_unique"
            ),
            *_amount_constraints("allocation_version"),
        ]

    def __str__(self) -> str:
        return f"{self.allocation} v{self.version}"


# Kueue's Workload.spec.maximumExecutionTimeSeconds is an int32; activeDeadlineSeconds of pods
# and Jobs is an int64, so the int32 bound holds for all three.
MAX_RUN_TIME_SECONDS = 2**31 - 1


class RunTimeLimit(models.Model):
    """The longest a pod, Job or Kueue Workload of one priority class may run in a team
    namespace, after which Kubernetes (or Kueue) ends it and its GPUs are free again.

    Written to the cluster as a Namespace annotation that an admission policy reads: pods,
    Jobs and Workloads of the class must state a deadline within it
    (quotas.kube.render.render_max_run_time_policy)."""

    team_namespace = models.ForeignKey(
        "quotas.TeamNamespace",
        on_delete=models.CASCADE,
        related_name="run_time_limits",
        verbose_name=_("team namespace"),
    )
    priority_class = models.ForeignKey(
        "quotas.PriorityClass",
        on_delete=models.PROTECT,
        related_name="run_time_limits",
        verbose_name=_("priority class"),
    )
    max_seconds = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(MAX_RUN_TIME_SECONDS)],
        help_text=_(
            "Longest run in seconds (86400 = one day); pods and jobs of the class must state a "
            "deadline within it."
        ),
        verbose_name=_("maximum run time (seconds)"),
    )
    updated_at = models.DateTimeField(auto_now=True, verbose_name=_("updated at"))

    class Meta:
        verbose_name = _("maximum run time")
        verbose_name_plural = _("maximum run times")
        ordering = ["team_namespace__cluster__name", "team_namespace__name", "priority_class__name"]
        constraints = [
            models.UniqueConstraint(
                fields=["team_namespace", "priority_class"], name="run_time_limit_unique"
            ),
            models.CheckConstraint(
                condition=Q(max_seconds__gte=1) & Q(max_seconds__lte=MAX_RUN_TIME_SECONDS),
                name="run_time_limit_seconds_in_range",
                violation_error_message="maximum run time must be between 1 and 2147483647 s",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team_namespace} {self.priority_class.name}: {self.max_seconds} s"
