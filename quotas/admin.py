"""Django admin for the quota model; allocation edits go through the versioning service."""

from django.contrib import admin

from quotas.models import (
    Allocation,
    AllocationVersion,
    Cluster,
    ClusterCapacity,
    PriorityClass,
    Resource,
    Team,
    TeamMembership,
    TeamNamespace,
)
from quotas.services import allocation_set


class ClusterCapacityInline(admin.TabularInline):
    model = ClusterCapacity
    extra = 0
    autocomplete_fields = ["resource"]


class TeamNamespaceInline(admin.TabularInline):
    model = TeamNamespace
    extra = 0
    fields = ["name", "team", "cluster", "workload_class"]
    autocomplete_fields = ["team", "cluster"]
    show_change_link = True


def save_allocation_versioned(request, obj: Allocation) -> Allocation:
    """Admin edits go through allocation_set so they keep history like every other path."""
    return allocation_set(
        team_namespace=obj.team_namespace,
        resource=obj.resource,
        guarantee=obj.guarantee,
        cap=obj.cap,
        per_pod_max=obj.per_pod_max,
        priority_classes=obj.priority_classes or [],
        acting_user=request.user,
        reason="edited in Django admin",
        source="django-admin",
    )


class AllocationInline(admin.TabularInline):
    model = Allocation
    extra = 0
    fields = ["resource", "guarantee", "cap", "per_pod_max", "priority_classes", "version"]
    readonly_fields = ["version"]
    autocomplete_fields = ["resource"]


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "environment",
        "connection",
        "volcano_enabled",
        "kueue_enabled",
        "yunikorn_enabled",
        "max_cap_share",
    ]
    list_filter = ["environment", "connection", "volcano_enabled", "kueue_enabled"]
    search_fields = ["name", "display_name", "description"]
    inlines = [ClusterCapacityInline, TeamNamespaceInline]
    fieldsets = [
        (None, {"fields": ["name", "display_name", "description", "environment"]}),
        (
            "Connection",
            {
                "fields": ["connection", "kubeconfig_path", "kubeconfig_context", "sandbox_url"],
                "description": "The kubeconfig is read from the portal's file system; its "
                "credentials are never stored in the database or shown here.",
            },
        ),
        (
            "Scheduler backends",
            {"fields": ["volcano_enabled", "kueue_enabled", "yunikorn_enabled"]},
        ),
        ("Rules", {"fields": ["max_cap_share"]}),
    ]


@admin.register(Resource)
class ResourceAdmin(admin.ModelAdmin):
    list_display = ["name", "display_name", "kind", "unit", "gpu_model"]
    list_filter = ["kind", "gpu_model"]
    search_fields = ["name", "display_name", "gpu_model"]


@admin.register(ClusterCapacity)
class ClusterCapacityAdmin(admin.ModelAdmin):
    list_display = ["cluster", "resource", "capacity"]
    list_filter = ["cluster", "resource"]
    search_fields = ["cluster__name", "resource__name"]
    autocomplete_fields = ["cluster", "resource"]


@admin.register(PriorityClass)
class PriorityClassAdmin(admin.ModelAdmin):
    list_display = ["name", "value", "preempts", "description"]
    search_fields = ["name", "description"]


class TeamMembershipInline(admin.TabularInline):
    model = TeamMembership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "parent", "contact_email"]
    list_filter = ["parent"]
    search_fields = ["slug", "name", "memberships__user__username"]
    autocomplete_fields = ["parent"]
    inlines = [TeamMembershipInline, TeamNamespaceInline]


@admin.register(TeamMembership)
class TeamMembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "role"]
    list_filter = ["role", "team"]
    search_fields = ["user__username", "user__email", "team__slug"]
    autocomplete_fields = ["user", "team"]


@admin.register(TeamNamespace)
class TeamNamespaceAdmin(admin.ModelAdmin):
    list_display = ["name", "cluster", "team", "workload_class"]
    list_filter = ["cluster", "workload_class", "team__parent"]
    search_fields = ["name", "team__slug", "team__name"]
    autocomplete_fields = ["team", "cluster"]
    inlines = [AllocationInline]

    def save_formset(self, request, form, formset, change):
        if formset.model is not Allocation:
            return super().save_formset(request, form, formset, change)
        instances = formset.save(commit=False)
        for obj in formset.deleted_objects:
            obj.delete()
        for obj in instances:
            save_allocation_versioned(request, obj)
        formset.save_m2m()
        return None


class AllocationVersionInline(admin.TabularInline):
    model = AllocationVersion
    extra = 0
    can_delete = False
    fields = [
        "version",
        "guarantee",
        "cap",
        "per_pod_max",
        "priority_classes",
        "changed_at",
        "changed_by",
        "source",
        "reason",
    ]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Allocation)
class AllocationAdmin(admin.ModelAdmin):
    list_display = [
        "team_namespace",
        "resource",
        "guarantee",
        "cap",
        "per_pod_max",
        "version",
        "updated_at",
    ]
    list_filter = ["team_namespace__cluster", "resource", "team_namespace__workload_class"]
    search_fields = ["team_namespace__name", "team_namespace__team__slug", "resource__name"]
    autocomplete_fields = ["team_namespace", "resource"]
    readonly_fields = ["version", "updated_at", "updated_by"]
    inlines = [AllocationVersionInline]

    def save_model(self, request, obj, form, change):
        saved = save_allocation_versioned(request, obj)
        obj.pk, obj.version = saved.pk, saved.version


@admin.register(AllocationVersion)
class AllocationVersionAdmin(admin.ModelAdmin):
    list_display = ["allocation", "version", "guarantee", "cap", "changed_at", "changed_by"]
    list_filter = ["allocation__team_namespace__cluster", "allocation__resource"]
    search_fields = ["allocation__team_namespace__name", "reason", "source"]
    readonly_fields = [f.name for f in AllocationVersion._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
