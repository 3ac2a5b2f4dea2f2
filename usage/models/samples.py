"""Usage of team namespaces: raw samples (cluster, Prometheus, CSV), daily rollups, and where a
cluster's Prometheus is.

A sample says what one namespace held of one resource at one instant; a rollup summarises one
namespace, resource and day (days in ``TIME_ZONE``). Raw samples are pruned after
``USAGE_RETENTION_DAYS``; rollups are kept. See ``usage/rollup.py`` for how each rollup
figure is computed.

On PostgreSQL the samples are partitioned by month (``usage/partitions.py``). Their key is
(namespace, resource, timestamp, source), the table's primary key there; ``id`` is a number
from a sequence without an index of its own, and the namespace and resource are not checked by
foreign keys row by row: every writer looks both up in the same transaction (the import
locks the namespaces it writes), and deleting a namespace deletes its samples through the ORM.
Without those per-row checks and indexes an import writes a sample in a fifth of the time.
"""

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from quotas.models.fields import ZERO, amount_field

DEFAULT_GPU_REQUESTS_QUERY = (
    'sum by ({label}) (kube_pod_container_resource_requests{resource="nvidia_com_gpu"})'
)
DEFAULT_GPU_UTIL_QUERY = "avg by ({label}) (DCGM_FI_DEV_GPU_UTIL)"
DEFAULT_GPU_MEMORY_QUERY = "sum by ({label}) (DCGM_FI_DEV_FB_USED)"


class UsageSource(models.TextChoices):
    CLUSTER = "cluster", _("cluster (pods read from the Kubernetes API)")
    PROMETHEUS = "prometheus", _("Prometheus")
    CSV = "csv", _("CSV import")


class TimeIndex(models.Index):
    """An index on a time column: BRIN on PostgreSQL, where samples come in time order and a
    block range's min and max find a day's rows at next to no cost per insert; a B-tree
    elsewhere."""

    def create_sql(self, model, schema_editor, using="", **kwargs):
        if schema_editor.connection.vendor == "postgresql":
            using = " USING brin"
        return super().create_sql(model, schema_editor, using=using, **kwargs)


class UsageSample(models.Model):
    """What one team namespace held of one resource at one instant."""

    team_namespace = models.ForeignKey(
        "quotas.TeamNamespace",
        on_delete=models.CASCADE,
        related_name="usage_samples",
        verbose_name=_("team namespace"),
        db_constraint=False,
        db_index=False,  # the key's first column
    )
    resource = models.ForeignKey(
        "quotas.Resource",
        on_delete=models.PROTECT,
        related_name="usage_samples",
        verbose_name=_("resource"),
        db_constraint=False,
        db_index=False,
    )
    timestamp = models.DateTimeField(verbose_name=_("timestamp"))
    allocated = amount_field(_("allocated"), help_text=_("Units requested by running pods."))
    utilization = models.DecimalField(
        _("utilization %"),
        max_digits=5,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[MinValueValidator(ZERO), MaxValueValidator(100)],
        help_text=_("Mean GPU utilization of the namespace's GPUs, 0-100 (Prometheus, CSV)."),
    )
    memory_used_mib = models.DecimalField(
        _("GPU memory used (MiB)"), max_digits=14, decimal_places=1, null=True, blank=True
    )
    pending = amount_field(
        _("pending"), default=ZERO, help_text=_("Units requested by pods waiting to be scheduled.")
    )
    pending_pods = models.PositiveIntegerField(default=0, verbose_name=_("pending pods"))
    # The longest wait among the pods pending at this instant (seconds since creation, or since
    # the scheduler last marked them unschedulable); empty when nothing waits or it is unknown.
    wait_seconds = models.PositiveIntegerField(
        null=True, blank=True, verbose_name=_("wait seconds")
    )
    # Pods of this namespace ended by preemption or eviction since the previous sample.
    evictions = models.PositiveIntegerField(default=0, verbose_name=_("evictions"))
    # What the namespace's Volcano Queue / Kueue ClusterQueue report (cluster source only).
    queue_allocated = amount_field(_("queue allocated"), null=True, blank=True)
    queue_borrowed = amount_field(_("queue borrowed"), null=True, blank=True)
    source = models.CharField(max_length=12, choices=UsageSource.choices, verbose_name=_("source"))

    class Meta:
        db_table = "quotas_usagesample"  # made by the quotas app, before usage had its own
        verbose_name = _("usage sample")
        verbose_name_plural = _("usage samples")
        ordering = ["team_namespace", "resource", "timestamp"]
        constraints = [
            # Also the index of every per-namespace read: (namespace, resource, time, ...).
            models.UniqueConstraint(
                fields=["team_namespace", "resource", "timestamp", "source"],
                name="usage_sample_unique_ns_resource_time_source",
            ),
            models.CheckConstraint(
                condition=Q(allocated__gte=ZERO) & Q(pending__gte=ZERO),
                name="usage_sample_amounts_not_negative",
            ),
            models.CheckConstraint(
                condition=Q(utilization__isnull=True)
                | Q(utilization__gte=ZERO, utilization__lte=100),
                name="usage_sample_utilization_0_100",
            ),
        ]
        # Rollups read a range of time across all namespaces.
        indexes = [TimeIndex(fields=["timestamp"], name="usage_sample_time")]

    def __str__(self) -> str:
        return f"{self.team_namespace} {self.resource} @ {self.timestamp:%Y-%m-%d %H:%M}"


class UsageDaily(models.Model):
    """One day of one team namespace and resource, rolled up from the samples."""

    team_namespace = models.ForeignKey(
        "quotas.TeamNamespace",
        on_delete=models.CASCADE,
        related_name="usage_days",
        verbose_name=_("team namespace"),
    )
    resource = models.ForeignKey(
        "quotas.Resource",
        on_delete=models.PROTECT,
        related_name="usage_days",
        verbose_name=_("resource"),
    )
    day = models.DateField(verbose_name=_("day"))
    # The source the allocation figures come from (the one with most samples that day).
    source = models.CharField(max_length=12, choices=UsageSource.choices, verbose_name=_("source"))
    samples = models.PositiveIntegerField(verbose_name=_("samples"))
    peak = amount_field(_("peak allocated"))
    p95 = amount_field(_("p95 allocated"))
    mean = amount_field(_("mean allocated"))
    utilization_mean = models.DecimalField(
        max_digits=5, decimal_places=2, null=True, blank=True, verbose_name=_("utilization mean")
    )
    memory_used_mean_mib = models.DecimalField(
        max_digits=14,
        decimal_places=1,
        null=True,
        blank=True,
        verbose_name=_("memory used mean mib"),
    )
    gpu_hours = models.DecimalField(max_digits=16, decimal_places=3, verbose_name=_("gpu hours"))
    # Unit-hours above the guarantee in force at each sample (borrowed from others) and of the
    # guarantee left unused (guaranteed but idle).
    borrowed_gpu_hours = models.DecimalField(
        max_digits=16, decimal_places=3, verbose_name=_("borrowed gpu hours")
    )
    idle_guaranteed_gpu_hours = models.DecimalField(
        max_digits=16, decimal_places=3, verbose_name=_("idle guaranteed gpu hours")
    )
    # The guarantee in force at the day's last sample.
    guarantee = amount_field(_("guarantee"), default=ZERO)
    # Longest wait of a pending pod seen that day, and the mean of the samples' longest waits
    # over the samples where something was pending.
    pending_wait_seconds = models.PositiveIntegerField(
        null=True, blank=True, verbose_name=_("pending wait seconds")
    )
    pending_wait_mean_seconds = models.PositiveIntegerField(
        null=True, blank=True, verbose_name=_("pending wait mean seconds")
    )
    pending_peak = amount_field(_("pending peak"), default=ZERO)
    evictions = models.PositiveIntegerField(default=0, verbose_name=_("evictions"))
    # How many of the day's samples (of ``source``) saw each demand, allocated + pending:
    # {"3.000": 188, ...}, the distribution the suggestions forecast from. Null on rollups
    # computed before it was kept; the suggestions then read those days' samples.
    demand_counts = models.JSONField(null=True, blank=True, verbose_name=_("demand counts"))
    computed_at = models.DateTimeField(auto_now=True, verbose_name=_("computed at"))

    class Meta:
        db_table = "quotas_usagedaily"
        verbose_name = _("usage daily")
        ordering = ["team_namespace", "resource", "day"]
        verbose_name_plural = _("usage days")
        constraints = [
            models.UniqueConstraint(
                fields=["team_namespace", "resource", "day"],
                name="usage_daily_unique_ns_resource_day",
            ),
        ]
        indexes = [models.Index(fields=["day"], name="usage_daily_day")]

    def __str__(self) -> str:
        return f"{self.team_namespace} {self.resource} {self.day}"


class PrometheusSource(models.Model):
    """The Prometheus of a cluster, and how its series name namespaces."""

    cluster = models.OneToOneField(
        "quotas.Cluster",
        on_delete=models.CASCADE,
        related_name="prometheus",
        verbose_name=_("cluster"),
    )
    url = models.URLField(
        _("Prometheus URL"), help_text=_("e.g. http://prometheus.monitoring:9090")
    )
    enabled = models.BooleanField(default=True, verbose_name=_("enabled"))
    namespace_label = models.CharField(
        max_length=100,
        default="namespace",
        help_text=_(
            "Label that carries the namespace; exported_namespace is common when "
            "kube-state-metrics is scraped through a service monitor."
        ),
        verbose_name=_("namespace label"),
    )
    gpu_requests_query = models.TextField(
        default=DEFAULT_GPU_REQUESTS_QUERY,
        help_text=_("GPUs requested per namespace; {label} is replaced by the namespace label."),
        verbose_name=_("gpu requests query"),
    )
    gpu_utilization_query = models.TextField(
        default=DEFAULT_GPU_UTIL_QUERY,
        blank=True,
        help_text=_("Mean GPU utilization, 0-100."),
        verbose_name=_("gpu utilization query"),
    )
    gpu_memory_query = models.TextField(
        default=DEFAULT_GPU_MEMORY_QUERY,
        blank=True,
        help_text=_("GPU memory used, MiB."),
        verbose_name=_("gpu memory query"),
    )
    resource = models.ForeignKey(
        "quotas.Resource",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text=_("Resource the GPU queries count; empty means nvidia.com/gpu."),
        verbose_name=_("resource"),
    )
    step_seconds = models.PositiveIntegerField(
        default=300, validators=[MinValueValidator(15)], verbose_name=_("step seconds")
    )
    # Until when samples were collected, so the beat asks only for what is new.
    collected_until = models.DateTimeField(
        null=True, blank=True, editable=False, verbose_name=_("collected until")
    )

    class Meta:
        db_table = "quotas_prometheussource"
        verbose_name = _("prometheus source")
        verbose_name_plural = _("prometheus sources")
        ordering = ["cluster__name"]

    def __str__(self) -> str:
        return f"{self.cluster}: {self.url}"
