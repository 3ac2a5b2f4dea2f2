"""Clusters the portal manages, the resource catalog, capacities and priority classes."""

from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from common.amounts import format_amount
from quotas.mig import CARD_MODELS
from quotas.models.fields import (
    ZERO,
    amount_field,
    dns1123_label_validator,
    resource_name_validator,
)
from quotas.rules import whole_number_error

MAX_CARDS = 100_000


def gpu_cards_validator(value) -> None:
    """``{model: count}``: models of quotas.mig.CARD_MODELS, counts whole and positive."""
    if not isinstance(value, dict):
        raise ValidationError(
            _('give the cards as {"model": count}, e.g. {"A100 80GB": 4}'), code="invalid"
        )
    for model, count in value.items():
        if model not in CARD_MODELS:
            raise ValidationError(
                _("%(model)s is not a MIG-capable card the portal knows (known: %(known)s)"),
                code="invalid",
                params={"model": model, "known": ", ".join(CARD_MODELS)},
            )
        if isinstance(count, bool) or not isinstance(count, int) or not 0 < count <= MAX_CARDS:
            raise ValidationError(
                _("the count of %(model)s cards must be a whole number from 1 to %(max)s"),
                code="invalid",
                params={"model": model, "max": MAX_CARDS},
            )


def _price_field(verbose_name, default: str, help_text) -> models.DecimalField:
    """A price per unit-hour the suggestions weigh (usage/forecast.py), above 0."""
    return models.DecimalField(
        verbose_name,
        max_digits=8,
        decimal_places=3,
        default=Decimal(default),
        validators=[MinValueValidator(Decimal("0.001"))],
        help_text=help_text,
    )


def share_field(verbose_name, help_text) -> models.DecimalField:
    """An optional share of a cluster's capacity, above 0 and at most 1 (empty: the default)."""
    return models.DecimalField(
        verbose_name,
        max_digits=4,
        decimal_places=3,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("0.01")), MaxValueValidator(Decimal("1"))],
        help_text=help_text,
    )


class Cluster(models.Model):
    class Environment(models.TextChoices):
        TEST = "test", _("Test")
        STAGING = "staging", _("Staging")
        PRODUCTION = "production", _("Production")

    class Connection(models.TextChoices):
        KUBECONFIG = "kubeconfig", _("kubeconfig file and context")
        IN_CLUSTER = "in_cluster", _("in-cluster service account")
        SANDBOX = "sandbox", _("sandbox API server (demo and tests)")

    name = models.SlugField(
        max_length=63, unique=True, validators=[dns1123_label_validator], verbose_name=_("name")
    )
    display_name = models.CharField(max_length=200, blank=True, verbose_name=_("display name"))
    description = models.TextField(blank=True, verbose_name=_("description"))
    environment = models.CharField(
        max_length=16,
        choices=Environment.choices,
        default=Environment.TEST,
        verbose_name=_("environment"),
    )
    connection = models.CharField(
        max_length=16,
        choices=Connection.choices,
        default=Connection.SANDBOX,
        verbose_name=_("connection"),
    )
    # The path to a kubeconfig mounted into the portal; the file (which holds credentials) is
    # never stored or shown by the portal, only its location.
    kubeconfig_path = models.CharField(
        max_length=500, blank=True, verbose_name=_("kubeconfig path")
    )
    kubeconfig_context = models.CharField(
        max_length=200, blank=True, verbose_name=_("kubeconfig context")
    )
    # Only for the sandbox connection: where the sandbox API listens (defaults to KUBE_SANDBOX_URL).
    sandbox_url = models.URLField(blank=True, verbose_name=_("sandbox url"))
    # The MIG-capable cards the cluster has, per model of quotas.mig.CARD_MODELS, e.g.
    # {"A100 80GB": 4}: the MIG slices guaranteed must be cut from them (quotas.rules).
    gpu_cards = models.JSONField(
        default=dict,
        blank=True,
        validators=[gpu_cards_validator],
        help_text=_(
            'MIG-capable cards per model, e.g. {"A100 80GB": 4}: the MIG slices guaranteed on '
            "the cluster must be cut from them."
        ),
        verbose_name=_("MIG-capable cards"),
    )

    # ResourceQuotas are always written; these add scheduler queues.
    volcano_enabled = models.BooleanField(_("Volcano"), default=False)
    kueue_enabled = models.BooleanField(_("Kueue"), default=False)
    yunikorn_enabled = models.BooleanField(_("YuniKorn"), default=False)

    class SyncMode(models.TextChoices):
        ENFORCE = "enforce", _("enforce: write changes, restore drift")
        REPORT_ONLY = "report_only", _("report only: write changes, report drift without restoring")
        SHADOW = "shadow", _("shadow: compute and report, write nothing")

    sync_mode = models.CharField(
        max_length=12,
        choices=SyncMode.choices,
        default=SyncMode.ENFORCE,
        verbose_name=_("sync mode"),
    )
    kueue_cohort = models.CharField(
        max_length=63,
        default="portal",
        validators=[dns1123_label_validator],
        verbose_name=_("kueue cohort"),
    )
    yunikorn_namespace = models.CharField(
        max_length=63,
        default="yunikorn",
        validators=[dns1123_label_validator],
        verbose_name=_("yunikorn namespace"),
    )
    # Kueue holds every pod whose cpu or memory no ClusterQueue covers, so every ClusterQueue
    # covers them; the pool they borrow from sits in the root Cohort (see quotas/kube/render.py).
    kueue_cpu_pool = models.DecimalField(
        _("Kueue cpu pool (cores)"),
        max_digits=12,
        decimal_places=3,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("0"))],
        help_text=_(
            "The cpu Kueue may admit in the whole cluster. Empty: the cluster's cpu "
            "capacity when one is recorded, otherwise unbounded (Kueue then gates only what the "
            "portal allocates and leaves cpu to the node scheduler)."
        ),
    )
    kueue_memory_pool_gib = models.DecimalField(
        _("Kueue memory pool (GiB)"),
        max_digits=12,
        decimal_places=3,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("0"))],
        help_text=_(
            "The memory Kueue may admit in the whole cluster, in GiB. Empty: the "
            "cluster's memory capacity when one is recorded, otherwise unbounded."
        ),
    )
    # Bumped whenever the desired state changes; written on objects so an older sync can
    # never overwrite what a newer one wrote.
    plan_generation = models.PositiveBigIntegerField(
        default=0, editable=False, verbose_name=_("plan generation")
    )

    max_cap_share = share_field(
        _("max cap share"),
        _(
            "Largest share of capacity one namespace's cap may reach; "
            "empty uses the portal default (QUOTA_DEFAULT_MAX_CAP_SHARE)."
        ),
    )
    top_priority_share = share_field(
        _("top priority share"),
        _(
            "Largest share of each resource's capacity that may be guaranteed to namespaces "
            "allowed the highest priority class; empty uses the portal default "
            "(QUOTA_DEFAULT_TOP_PRIORITY_SHARE, no limit unless set)."
        ),
    )

    # What a GPU-hour costs on this cluster (a cloud's price, or the cost of the own cards),
    # in the portal's currency (QUOTA_CURRENCY); a MIG slice costs its share of a card.
    gpu_hour_price = models.DecimalField(
        _("GPU-hour price"),
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal(0))],
        help_text=_(
            "What one GPU-hour costs on this cluster, in the portal's currency "
            "(QUOTA_CURRENCY); empty: no cost is shown."
        ),
    )

    # What the suggestions weigh (usage/forecast.py): the price of one unit-hour of each way a
    # guarantee and a cap can miss the demand, relative to one another.
    suggest_idle_price = _price_field(
        _("price of an idle guaranteed unit-hour"),
        "1",
        _("What a guaranteed unit-hour nothing runs on costs the suggestions."),
    )
    suggest_borrowed_price = _price_field(
        _("price of a borrowed unit-hour"),
        "0.5",
        _(
            "What a unit-hour of demand above the guarantee (borrowed, may be reclaimed) costs "
            "the suggestions, for training and dev namespaces."
        ),
    )
    suggest_inference_borrowed_price = _price_field(
        _("price of a borrowed inference unit-hour"),
        "2",
        _("The same for inference namespaces: a reclaimed server drops live traffic."),
    )
    suggest_blocked_price = _price_field(
        _("price of a blocked unit-hour"),
        "4",
        _("What a unit-hour of demand above the cap (cannot run) costs the suggestions."),
    )

    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))
    updated_at = models.DateTimeField(auto_now=True, verbose_name=_("updated at"))

    class Meta:
        verbose_name = _("cluster")
        verbose_name_plural = _("clusters")
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(max_cap_share__isnull=True)
                | Q(max_cap_share__gt=0, max_cap_share__lte=1),
                name="cluster_max_cap_share_in_0_1",
            ),
            models.CheckConstraint(
                condition=Q(top_priority_share__isnull=True)
                | Q(top_priority_share__gt=0, top_priority_share__lte=1),
                name="cluster_top_priority_share_in_0_1",
            ),
            models.CheckConstraint(
                condition=Q(gpu_hour_price__isnull=True) | Q(gpu_hour_price__gte=0),
                name="cluster_gpu_hour_price_not_negative",
            ),
            models.CheckConstraint(
                condition=Q(suggest_idle_price__gt=0)
                & Q(suggest_borrowed_price__gt=0)
                & Q(suggest_inference_borrowed_price__gt=0)
                & Q(suggest_blocked_price__gt=0),
                name="cluster_suggest_prices_positive",
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

    @property
    def effective_top_priority_share(self) -> Decimal | None:
        """The cluster's limit on what the highest priority class is guaranteed, else the
        portal's default (None: no limit)."""
        if self.top_priority_share is not None:
            return self.top_priority_share
        default = settings.QUOTA_DEFAULT_TOP_PRIORITY_SHARE
        return None if default is None else Decimal(str(default))


class Resource(models.Model):
    """A schedulable resource name with its unit and how quotas express it."""

    class Kind(models.TextChoices):
        GPU = "gpu", _("whole GPU")
        MIG = "mig", _("MIG slice")
        VGPU_MEMORY = "vgpu_memory", _("vGPU memory (HAMi)")
        VGPU_CORES = "vgpu_cores", _("vGPU cores (HAMi)")
        CPU = "cpu", _("CPU")
        MEMORY = "memory", _("memory")

    name = models.CharField(
        max_length=253, unique=True, validators=[resource_name_validator], verbose_name=_("name")
    )
    display_name = models.CharField(max_length=200, verbose_name=_("display name"))
    kind = models.CharField(
        max_length=16, choices=Kind.choices, default=Kind.GPU, verbose_name=_("kind")
    )
    unit = models.CharField(
        max_length=32, default="GPU", help_text=_("e.g. GPU, slice, MiB, %"), verbose_name=_("unit")
    )
    # Suffix appended to amounts when written as Kubernetes quantities (e.g. "Gi" for memory).
    quantity_suffix = models.CharField(max_length=4, blank=True, verbose_name=_("quantity suffix"))
    gpu_model = models.CharField(
        max_length=100, blank=True, help_text=_("e.g. A100 80GB"), verbose_name=_("gpu model")
    )

    class Meta:
        verbose_name = _("resource")
        verbose_name_plural = _("resources")
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
    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="capacities", verbose_name=_("cluster")
    )
    resource = models.ForeignKey(
        Resource, on_delete=models.PROTECT, related_name="capacities", verbose_name=_("resource")
    )
    capacity = amount_field(_("capacity"))

    class Meta:
        verbose_name = _("cluster capacity")
        ordering = ["cluster__name", "resource__name"]
        verbose_name_plural = _("cluster capacities")
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

    name = models.CharField(
        max_length=253, unique=True, validators=[dns1123_label_validator], verbose_name=_("name")
    )
    value = models.IntegerField(
        validators=[MaxValueValidator(1_000_000_000)],
        help_text=_("Higher runs first; values above 1e9 are reserved by Kubernetes."),
        verbose_name=_("value"),
    )
    description = models.CharField(max_length=500, blank=True, verbose_name=_("description"))
    preempts = models.BooleanField(
        default=True,
        help_text=_("If false, pods of this class never preempt others."),
        verbose_name=_("preempts"),
    )

    class Meta:
        verbose_name = _("priority class")
        ordering = ["-value"]
        verbose_name_plural = _("priority classes")
        constraints = [
            models.CheckConstraint(
                condition=Q(value__lte=1_000_000_000), name="priorityclass_value_not_reserved"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.value})"
