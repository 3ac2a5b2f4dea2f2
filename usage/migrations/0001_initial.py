"""The usage app takes over the usage and suggestion models of the quotas app: their tables
(quotas_usagesample, quotas_usagedaily, quotas_prometheussource, quotas_suggestion) stay as
they are, only Django's idea of which app holds them moves."""

import django.core.validators
import django.db.models.deletion
from decimal import Decimal
from django.db import migrations, models


def content_types_to_usage(apps, schema_editor):
    """Keep the content types (and so the permissions given to the role groups, and the admin's
    log) of the moved models: quotas -> usage."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.filter(
        app_label="quotas",
        model__in=("usagesample", "usagedaily", "prometheussource", "suggestion"),
    ).update(app_label="usage")


def content_types_to_usage_back(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.filter(
        app_label="usage", model__in=("usagesample", "usagedaily", "prometheussource", "suggestion")
    ).update(app_label="quotas")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("quotas", "0009_verbose_names"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="PrometheusSource",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "url",
                            models.URLField(
                                help_text="e.g. http://prometheus.monitoring:9090",
                                verbose_name="Prometheus URL",
                            ),
                        ),
                        ("enabled", models.BooleanField(default=True, verbose_name="enabled")),
                        (
                            "namespace_label",
                            models.CharField(
                                default="namespace",
                                help_text="Label that carries the namespace; exported_namespace is common when kube-state-metrics is scraped through a service monitor.",
                                max_length=100,
                                verbose_name="namespace label",
                            ),
                        ),
                        (
                            "gpu_requests_query",
                            models.TextField(
                                default='sum by ({label}) (kube_pod_container_resource_requests{resource="nvidia_com_gpu"})',
                                help_text="GPUs requested per namespace; {label} is replaced by the namespace label.",
                                verbose_name="gpu requests query",
                            ),
                        ),
                        (
                            "gpu_utilization_query",
                            models.TextField(
                                blank=True,
                                default="avg by ({label}) (DCGM_FI_DEV_GPU_UTIL)",
                                help_text="Mean GPU utilization, 0-100.",
                                verbose_name="gpu utilization query",
                            ),
                        ),
                        (
                            "gpu_memory_query",
                            models.TextField(
                                blank=True,
                                default="sum by ({label}) (DCGM_FI_DEV_FB_USED)",
                                help_text="GPU memory used, MiB.",
                                verbose_name="gpu memory query",
                            ),
                        ),
                        (
                            "step_seconds",
                            models.PositiveIntegerField(
                                default=300,
                                validators=[django.core.validators.MinValueValidator(15)],
                                verbose_name="step seconds",
                            ),
                        ),
                        (
                            "collected_until",
                            models.DateTimeField(
                                blank=True,
                                editable=False,
                                null=True,
                                verbose_name="collected until",
                            ),
                        ),
                        (
                            "cluster",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="prometheus",
                                to="quotas.cluster",
                                verbose_name="cluster",
                            ),
                        ),
                        (
                            "resource",
                            models.ForeignKey(
                                blank=True,
                                help_text="Resource the GPU queries count; empty means nvidia.com/gpu.",
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="quotas.resource",
                                verbose_name="resource",
                            ),
                        ),
                    ],
                    options={
                        "verbose_name": "prometheus source",
                        "verbose_name_plural": "prometheus sources",
                        "db_table": "quotas_prometheussource",
                        "ordering": ["cluster__name"],
                    },
                ),
                migrations.CreateModel(
                    name="Suggestion",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("month", models.DateField(verbose_name="month")),
                        (
                            "current_guarantee",
                            models.DecimalField(
                                decimal_places=3, max_digits=14, verbose_name="current guarantee"
                            ),
                        ),
                        (
                            "current_cap",
                            models.DecimalField(
                                decimal_places=3, max_digits=14, verbose_name="current cap"
                            ),
                        ),
                        (
                            "suggested_guarantee",
                            models.DecimalField(
                                decimal_places=3, max_digits=14, verbose_name="suggested guarantee"
                            ),
                        ),
                        (
                            "suggested_cap",
                            models.DecimalField(
                                decimal_places=3, max_digits=14, verbose_name="suggested cap"
                            ),
                        ),
                        (
                            "confidence",
                            models.CharField(
                                choices=[
                                    ("high", "high"),
                                    ("medium", "medium"),
                                    ("low", "low (thin data)"),
                                    ("none", "none (no usage data)"),
                                ],
                                max_length=8,
                                verbose_name="confidence",
                            ),
                        ),
                        (
                            "figures",
                            models.JSONField(blank=True, default=dict, verbose_name="figures"),
                        ),
                        ("notes", models.JSONField(blank=True, default=list, verbose_name="notes")),
                        ("flags", models.JSONField(blank=True, default=list, verbose_name="flags")),
                        ("computed_at", models.DateTimeField(verbose_name="computed at")),
                        (
                            "cluster",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="suggestions",
                                to="quotas.cluster",
                                verbose_name="cluster",
                            ),
                        ),
                        (
                            "resource",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="suggestions",
                                to="quotas.resource",
                                verbose_name="resource",
                            ),
                        ),
                        (
                            "team_namespace",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="suggestions",
                                to="quotas.teamnamespace",
                                verbose_name="team namespace",
                            ),
                        ),
                    ],
                    options={
                        "verbose_name": "suggestion",
                        "verbose_name_plural": "suggestions",
                        "db_table": "quotas_suggestion",
                        "ordering": [
                            "-month",
                            "cluster__name",
                            "team_namespace__name",
                            "resource__name",
                        ],
                        "indexes": [
                            models.Index(
                                fields=["cluster", "month"], name="suggestion_cluster_month"
                            )
                        ],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("team_namespace", "resource", "month"),
                                name="suggestion_unique_ns_resource_month",
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="UsageDaily",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("day", models.DateField(verbose_name="day")),
                        (
                            "source",
                            models.CharField(
                                choices=[
                                    ("cluster", "cluster (pods read from the Kubernetes API)"),
                                    ("prometheus", "Prometheus"),
                                    ("csv", "CSV import"),
                                ],
                                max_length=12,
                                verbose_name="source",
                            ),
                        ),
                        ("samples", models.PositiveIntegerField(verbose_name="samples")),
                        (
                            "peak",
                            models.DecimalField(
                                decimal_places=3, max_digits=14, verbose_name="peak allocated"
                            ),
                        ),
                        (
                            "p95",
                            models.DecimalField(
                                decimal_places=3, max_digits=14, verbose_name="p95 allocated"
                            ),
                        ),
                        (
                            "mean",
                            models.DecimalField(
                                decimal_places=3, max_digits=14, verbose_name="mean allocated"
                            ),
                        ),
                        (
                            "utilization_mean",
                            models.DecimalField(
                                blank=True,
                                decimal_places=2,
                                max_digits=5,
                                null=True,
                                verbose_name="utilization mean",
                            ),
                        ),
                        (
                            "memory_used_mean_mib",
                            models.DecimalField(
                                blank=True,
                                decimal_places=1,
                                max_digits=14,
                                null=True,
                                verbose_name="memory used mean mib",
                            ),
                        ),
                        (
                            "gpu_hours",
                            models.DecimalField(
                                decimal_places=3, max_digits=16, verbose_name="gpu hours"
                            ),
                        ),
                        (
                            "borrowed_gpu_hours",
                            models.DecimalField(
                                decimal_places=3, max_digits=16, verbose_name="borrowed gpu hours"
                            ),
                        ),
                        (
                            "idle_guaranteed_gpu_hours",
                            models.DecimalField(
                                decimal_places=3,
                                max_digits=16,
                                verbose_name="idle guaranteed gpu hours",
                            ),
                        ),
                        (
                            "guarantee",
                            models.DecimalField(
                                decimal_places=3,
                                default=Decimal("0"),
                                max_digits=14,
                                verbose_name="guarantee",
                            ),
                        ),
                        (
                            "pending_wait_seconds",
                            models.PositiveIntegerField(
                                blank=True, null=True, verbose_name="pending wait seconds"
                            ),
                        ),
                        (
                            "pending_wait_mean_seconds",
                            models.PositiveIntegerField(
                                blank=True, null=True, verbose_name="pending wait mean seconds"
                            ),
                        ),
                        (
                            "pending_peak",
                            models.DecimalField(
                                decimal_places=3,
                                default=Decimal("0"),
                                max_digits=14,
                                verbose_name="pending peak",
                            ),
                        ),
                        (
                            "evictions",
                            models.PositiveIntegerField(default=0, verbose_name="evictions"),
                        ),
                        (
                            "computed_at",
                            models.DateTimeField(auto_now=True, verbose_name="computed at"),
                        ),
                        (
                            "resource",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="usage_days",
                                to="quotas.resource",
                                verbose_name="resource",
                            ),
                        ),
                        (
                            "team_namespace",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="usage_days",
                                to="quotas.teamnamespace",
                                verbose_name="team namespace",
                            ),
                        ),
                    ],
                    options={
                        "verbose_name": "usage daily",
                        "verbose_name_plural": "usage days",
                        "db_table": "quotas_usagedaily",
                        "ordering": ["team_namespace", "resource", "day"],
                        "indexes": [models.Index(fields=["day"], name="usage_daily_day")],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("team_namespace", "resource", "day"),
                                name="usage_daily_unique_ns_resource_day",
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="UsageSample",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("timestamp", models.DateTimeField(verbose_name="timestamp")),
                        (
                            "allocated",
                            models.DecimalField(
                                decimal_places=3,
                                help_text="Units requested by running pods.",
                                max_digits=14,
                                verbose_name="allocated",
                            ),
                        ),
                        (
                            "utilization",
                            models.DecimalField(
                                blank=True,
                                decimal_places=2,
                                help_text="Mean GPU utilization of the namespace's GPUs, 0-100 (Prometheus, CSV).",
                                max_digits=5,
                                null=True,
                                validators=[
                                    django.core.validators.MinValueValidator(Decimal("0")),
                                    django.core.validators.MaxValueValidator(100),
                                ],
                                verbose_name="utilization %",
                            ),
                        ),
                        (
                            "memory_used_mib",
                            models.DecimalField(
                                blank=True,
                                decimal_places=1,
                                max_digits=14,
                                null=True,
                                verbose_name="GPU memory used (MiB)",
                            ),
                        ),
                        (
                            "pending",
                            models.DecimalField(
                                decimal_places=3,
                                default=Decimal("0"),
                                help_text="Units requested by pods waiting to be scheduled.",
                                max_digits=14,
                                verbose_name="pending",
                            ),
                        ),
                        (
                            "pending_pods",
                            models.PositiveIntegerField(default=0, verbose_name="pending pods"),
                        ),
                        (
                            "wait_seconds",
                            models.PositiveIntegerField(
                                blank=True, null=True, verbose_name="wait seconds"
                            ),
                        ),
                        (
                            "evictions",
                            models.PositiveIntegerField(default=0, verbose_name="evictions"),
                        ),
                        (
                            "queue_allocated",
                            models.DecimalField(
                                blank=True,
                                decimal_places=3,
                                max_digits=14,
                                null=True,
                                verbose_name="queue allocated",
                            ),
                        ),
                        (
                            "queue_borrowed",
                            models.DecimalField(
                                blank=True,
                                decimal_places=3,
                                max_digits=14,
                                null=True,
                                verbose_name="queue borrowed",
                            ),
                        ),
                        (
                            "source",
                            models.CharField(
                                choices=[
                                    ("cluster", "cluster (pods read from the Kubernetes API)"),
                                    ("prometheus", "Prometheus"),
                                    ("csv", "CSV import"),
                                ],
                                max_length=12,
                                verbose_name="source",
                            ),
                        ),
                        (
                            "resource",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="usage_samples",
                                to="quotas.resource",
                                verbose_name="resource",
                            ),
                        ),
                        (
                            "team_namespace",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="usage_samples",
                                to="quotas.teamnamespace",
                                verbose_name="team namespace",
                            ),
                        ),
                    ],
                    options={
                        "verbose_name": "usage sample",
                        "verbose_name_plural": "usage samples",
                        "db_table": "quotas_usagesample",
                        "ordering": ["team_namespace", "resource", "timestamp"],
                        "indexes": [
                            models.Index(fields=["timestamp"], name="usage_sample_timestamp")
                        ],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("team_namespace", "resource", "timestamp", "source"),
                                name="usage_sample_unique_ns_resource_time_source",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(
                                    ("allocated__gte", Decimal("0")), ("pending__gte", Decimal("0"))
                                ),
                                name="usage_sample_amounts_not_negative",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(
                                    ("utilization__isnull", True),
                                    models.Q(
                                        ("utilization__gte", Decimal("0")),
                                        ("utilization__lte", 100),
                                    ),
                                    _connector="OR",
                                ),
                                name="usage_sample_utilization_0_100",
                            ),
                        ],
                    },
                ),
            ],
        ),
        migrations.RunPython(content_types_to_usage, content_types_to_usage_back),
    ]
