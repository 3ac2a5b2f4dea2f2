"""Clusters the portal manages, the resource catalog, capacities and priority classes."""

from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from common.amounts import format_amount
from quotas.models.fields import (
    ZERO,
    amount_field,
    dns1123_label_validator,
    resource_name_validator,
)
from quotas.rules import whole_number_error


class Cluster(models.Model):
    class Environment(models.TextChoices):
        TEST = "test", _("Test")
        STAGING = "staging", _("Staging")
        PRODUCTION = "production", _("Production")

    class Connection(models.TextChoices):
        KUBECONFIG = "kubeconfig", _("kubeconfig file and context")
        IN_CLUSTER = "in_cluster", _("in-cluster service account")
        SANDBOX = "sandbox", _("sandbox API server (demo and tests)")

    name = models.SlugField(max_length=63, unique=True, validators=[dns1123_label_validator])
    display_name = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    environment = models.CharField(
        max_length=16, choices=Environment.choices, default=Environment.TEST
    )
    connection = models.CharField(
        max_length=16, choices=Connection.choices, default=Connection.SANDBOX
    )
    # The path to a kubeconfig mounted into the portal; the file (which holds credentials) is
    # never stored or shown by the portal, only its location.
    kubeconfig_path = models.CharField(max_length=500, blank=True)
    kubeconfig_context = models.CharField(max_length=200, blank=True)
    # Only for the sandbox connection: where the sandbox API listens (defaults to KUBE_SANDBOX_URL).
    sandbox_url = models.URLField(blank=True)

    # ResourceQuotas are always written; these add scheduler queues.
    volcano_enabled = models.BooleanField("Volcano", default=False)
    kueue_enabled = models.BooleanField("Kueue", default=False)
    yunikorn_enabled = models.BooleanField("YuniKorn", default=False)

    class SyncMode(models.TextChoices):
        ENFORCE = "enforce", _("enforce: write changes, restore drift")
        REPORT_ONLY = "report_only", _("report only: write changes, report drift without restoring")
        SHADOW = "shadow", _("shadow: compute and report, write nothing")

    sync_mode = models.CharField(max_length=12, choices=SyncMode.choices, default=SyncMode.ENFORCE)
    kueue_cohort = models.CharField(
        max_length=63, default="portal", validators=[dns1123_label_validator]
    )
    yunikorn_namespace = models.CharField(
        max_length=63, default="yunikorn", validators=[dns1123_label_validator]
    )
    # Kueue holds every pod whose cpu or memory no ClusterQueue covers, so every ClusterQueue
    # covers them; the pool they borrow from sits in the root Cohort (see quotas/kube/render.py).
    kueue_cpu_pool = models.DecimalField(
        "Kueue cpu pool (cores)",
        max_digits=12,
        decimal_places=3,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("0"))],
        help_text="The cpu Kueue may admit in the whole cluster. Empty: the cluster's cpu "
        "capacity when one is recorded, otherwise unbounded (Kueue then gates only what the "
        "portal allocates and leaves cpu to the node scheduler).",
    )
    kueue_memory_pool_gib = models.DecimalField(
        "Kueue memory pool (GiB)",
        max_digits=12,
        decimal_places=3,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("0"))],
        help_text="The memory Kueue may admit in the whole cluster, in GiB. Empty: the "
        "cluster's memory capacity when one is recorded, otherwise unbounded.",
    )
    # Bumped whenever the desired state changes; written on objects so an older sync can
    # never overwrite what a newer one wrote.
    plan_generation = models.PositiveBigIntegerField(default=0, editable=False)

    max_cap_share = models.DecimalField(
        "max cap share",
        max_digits=4,
        decimal_places=3,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("0.01")), MaxValueValidator(Decimal("1"))],
        help_text="Largest share of capacity one namespace's cap may reach; "
        "empty uses the portal default (QUOTA_DEFAULT_MAX_CAP_SHARE).",
    )

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(max_cap_share__isnull=True)
                | Q(max_cap_share__gt=0, max_cap_share__lte=1),
                name="cluster_max_cap_share_in_0_1",
            ),
            models.CheckConstraint(
                condition=~Q(connection="kubeconfig") | ~Q(kubeconfig_path=""),
                name="cluster_kubeconfig_needs_path",
            ),
            models.CheckConstraint(
                condition=(Q(kueue_cpu_pool__isnull=True) | Q(kueue_cpu_pool__gte=0))
                & (Q(kueue_memory_pool_gib__isnull=True) | Q(kueue_memory_pool_gib__gte=0)),
                name="cluster_kueue_pools_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def backends(self) -> list[str]:
        names = ["core"]
        if self.volcano_enabled:
            names.append("volcano")
        if self.kueue_enabled:
            names.append("kueue")
        if self.yunikorn_enabled:
            names.append("yunikorn")
        return names

    @property
    def effective_max_cap_share(self) -> Decimal:
        if self.max_cap_share is not None:
            return self.max_cap_share
        return Decimal(str(settings.QUOTA_DEFAULT_MAX_CAP_SHARE))


class Resource(models.Model):
    """A schedulable resource name with its unit and how quotas express it."""

    class Kind(models.TextChoices):
        GPU = "gpu", _("whole GPU")
        MIG = "mig", _("MIG slice")
        VGPU_MEMORY = "vgpu_memory", _("vGPU memory (HAMi)")
        VGPU_CORES = "vgpu_cores", _("vGPU cores (HAMi)")
        CPU = "cpu", _("CPU")
        MEMORY = "memory", _("memory")

    name = models.CharField(max_length=253, unique=True, validators=[resource_name_validator])
    display_name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.GPU)
    unit = models.CharField(max_length=32, default="GPU", help_text="e.g. GPU, slice, MiB, %")
    # Suffix appended to amounts when written as Kubernetes quantities (e.g. "Gi" for memory).
    quantity_suffix = models.CharField(max_length=4, blank=True)
    gpu_model = models.CharField(max_length=100, blank=True, help_text="e.g. A100 80GB")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_extended(self) -> bool:
        """Extended resources (anything with a domain) can only be quota'd on requests/limits."""
        return "/" in self.name

    @property
    def whole_units(self) -> bool:
        """Counted in whole units: GPUs, MIG slices, HAMi's vGPU memory (MiB) and cores (%),
        and every extended resource (Kubernetes and Volcano refuse fractions of them)."""
        return self.kind in WHOLE_KINDS or self.is_extended

    def whole_number_errors(self, values: dict[str, Decimal | None]) -> dict[str, str]:
        """Per field, the error of an amount with a fraction; empty when all are whole."""
        if not self.whole_units:
            return {}
        errors = {}
        for field, value in values.items():
            message = whole_number_error(field, value, self.name)
            if message:
                errors[field] = message
        return errors


WHOLE_KINDS = frozenset(
    {Resource.Kind.GPU, Resource.Kind.MIG, Resource.Kind.VGPU_MEMORY, Resource.Kind.VGPU_CORES}
)


class ClusterCapacity(models.Model):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="capacities")
    resource = models.ForeignKey(Resource, on_delete=models.PROTECT, related_name="capacities")
    capacity = amount_field("capacity")

    class Meta:
        ordering = ["cluster__name", "resource__name"]
        verbose_name_plural = "cluster capacities"
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "resource"], name="capacity_unique_cluster_resource"
            ),
            models.CheckConstraint(condition=Q(capacity__gte=ZERO), name="capacity_not_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster}: {format_amount(self.capacity)} {self.resource}"

    def clean(self) -> None:
        super().clean()
        if self.resource_id is not None and self.capacity is not None:
            errors = self.resource.whole_number_errors({"capacity": Decimal(self.capacity)})
            if errors:
                raise ValidationError(errors)


class PriorityClass(models.Model):
    """A cluster-wide PriorityClass the portal writes to every cluster it manages."""

    name = models.CharField(max_length=253, unique=True, validators=[dns1123_label_validator])
    value = models.IntegerField(
        validators=[MaxValueValidator(1_000_000_000)],
        help_text="Higher runs first; values above 1e9 are reserved by Kubernetes.",
    )
    description = models.CharField(max_length=500, blank=True)
    preempts = models.BooleanField(
        default=True, help_text="If false, pods of this class never preempt others."
    )

    class Meta:
        ordering = ["-value"]
        verbose_name_plural = "priority classes"
        constraints = [
            models.CheckConstraint(
                condition=Q(value__lte=1_000_000_000), name="priorityclass_value_not_reserved"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.value})"
