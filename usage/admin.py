"""Django admin of usage: samples, rollups, suggestions and their backtest are read-only (the
collectors, the rollup, the monthly job, suggest_quotas and evaluate_suggestions write them); a
cluster's Prometheus is edited."""

from django.contrib import admin

from usage.models import (
    PrometheusSource,
    Suggestion,
    SuggestionBacktest,
    UsageDaily,
    UsageSample,
)


class _ReadOnly(admin.ModelAdmin):
    """Written by the collectors and the rollup only."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(UsageSample)
class UsageSampleAdmin(_ReadOnly):
    list_display = [
        "timestamp",
        "team_namespace",
        "resource",
        "allocated",
        "utilization",
        "pending",
        "wait_seconds",
        "evictions",
        "source",
    ]
    list_filter = ["source", "team_namespace__cluster", "resource"]
    search_fields = ["team_namespace__name"]
    list_select_related = ["team_namespace__cluster", "resource"]
    readonly_fields = [f.name for f in UsageSample._meta.fields]
    show_full_result_count = False  # millions of rows: no COUNT(*) per page
    # The list shows every figure; a sample's own page would be found by its id, which has no
    # index of its own (usage/models/samples.py).
    list_display_links = None


@admin.register(UsageDaily)
class UsageDailyAdmin(_ReadOnly):
    list_display = [
        "day",
        "team_namespace",
        "resource",
        "samples",
        "peak",
        "p95",
        "mean",
        "utilization_mean",
        "gpu_hours",
        "borrowed_gpu_hours",
        "idle_guaranteed_gpu_hours",
        "pending_wait_seconds",
        "evictions",
    ]
    list_filter = ["team_namespace__cluster", "resource", "source"]
    search_fields = ["team_namespace__name"]
    list_select_related = ["team_namespace__cluster", "resource"]
    readonly_fields = [f.name for f in UsageDaily._meta.fields]
    date_hierarchy = "day"


@admin.register(PrometheusSource)
class PrometheusSourceAdmin(admin.ModelAdmin):
    list_display = ["cluster", "url", "enabled", "namespace_label", "collected_until"]
    list_select_related = ["cluster"]
    readonly_fields = ["collected_until"]
    autocomplete_fields = ["cluster"]


@admin.register(Suggestion)
class SuggestionAdmin(admin.ModelAdmin):
    list_display = [
        "month",
        "cluster",
        "team_namespace",
        "resource",
        "current_guarantee",
        "current_cap",
        "suggested_guarantee",
        "suggested_cap",
        "confidence",
        "computed_at",
    ]
    list_filter = ["cluster", "month", "confidence", "resource"]
    search_fields = ["team_namespace__name", "team_namespace__team__slug"]
    list_select_related = ["cluster", "team_namespace__cluster", "resource"]
    readonly_fields = [f.name for f in Suggestion._meta.fields]

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(SuggestionBacktest)
class SuggestionBacktestAdmin(_ReadOnly):
    """Written by the monthly job and evaluate_suggestions --cluster only."""

    list_display = [
        "month",
        "cluster",
        "resource",
        "policy",
        "namespaces",
        *SuggestionBacktest.SCORE_FIELDS,
        "computed_at",
    ]
    list_filter = ["cluster", "resource", "policy", "month"]
    list_select_related = ["cluster", "resource"]
    readonly_fields = [f.name for f in SuggestionBacktest._meta.fields]
    date_hierarchy = "month"
