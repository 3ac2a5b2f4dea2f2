"""Django admin of suggestions: read-only (the monthly job and suggest_quotas write them)."""

from django.contrib import admin

from quotas.models import Suggestion


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
