"""Django admin for the quota model, people and role groups.

The admin is no side door: allocations are read-only here (they change through quota
requests: rules, approval, version, audit, sync), and every other save or delete (clusters,
capacities, resources, priority classes, teams and their memberships and namespaces, users
and groups) goes through the same services as everywhere else (checked, audited in the same
transaction, synced), inline rows included; deletes are refused while something depends on
the object. Nothing that would delete allocations or their history is offered.
"""

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django.core.exceptions import PermissionDenied
from django.db import models, transaction
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from common.amounts import PLAIN_DECIMAL_FIELDS
from common.errors import ApplicationError
from quotas.clusters import (
    cluster_delete,
    cluster_save,
    resource_delete,
    resource_save,
)
from quotas.kube.client import KubeError
from quotas.kube.status import cluster_backend_problems
from quotas.kube.sync import cluster_preview
from quotas.models import (
    Allocation,
    AllocationVersion,
    AuditEvent,
    Cluster,
    ClusterCapacity,
    DriftEvent,
    ManagedObject,
    PriorityClass,
    Resource,
    RunTimeLimit,
    SyncLease,
    SyncObjectResult,
    SyncRequest,
    SyncRun,
    Team,
    TeamMembership,
    TeamNamespace,
)
from quotas.models.audit import AuditChainHead
from quotas.people import (
    group_check,
    group_delete,
    group_delete_problems,
    group_save,
    user_delete,
    user_delete_problems,
    user_save,
)
from quotas.services import (
    PRIORITY_CLASS_IMMUTABLE,
    cluster_capacity_check,
    cluster_capacity_delete,
    cluster_capacity_delete_problems,
    cluster_capacity_set,
    cluster_set_sync_mode,
    cluster_sync_request,
    priority_class_delete,
    priority_class_delete_problems,
    priority_class_save,
    run_time_limit_check,
    run_time_limit_delete,
    run_time_limit_set,
    run_time_seconds,
    team_namespace_set_shadow,
)
from quotas.teams import (
    team_check,
    team_delete,
    team_membership_delete,
    team_membership_save,
    team_namespace_check,
    team_namespace_delete,
    team_namespace_save,
    team_save,
)


class ViewOnlyInline(admin.TabularInline):
    """Shown for reading; changed elsewhere, through a service."""

    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ServiceErrorsForm(forms.ModelForm):
    """Shows a service's refusal on the field it names instead of failing the save."""

    def add_service_error(self, exc: ApplicationError) -> None:
        self.add_error(exc.field if exc.field in self.fields else None, exc.message)

    def check_with(self, check, **kwargs) -> None:
        try:
            check(**kwargs)
        except ApplicationError as exc:
            self.add_service_error(exc)


def _membership_save(obj, user) -> None:
    team_membership_save(membership=obj, acting_user=user, comment="Django admin")


def _membership_delete(obj, user) -> None:
    team_membership_delete(membership=obj, acting_user=user, comment="Django admin")


def _namespace_save(obj, user) -> None:
    team_namespace_save(team_namespace=obj, acting_user=user, comment="Django admin")


def _namespace_delete(obj, user) -> None:
    team_namespace_delete(team_namespace=obj, acting_user=user, comment="Django admin")


# The services of the rows inlines edit: model -> (save, delete).
INLINE_SERVICES = {
    TeamMembership: (_membership_save, _membership_delete),
    TeamNamespace: (_namespace_save, _namespace_delete),
}


class SaveThroughServiceMixin:
    """Saves go through the object's service (checked, audited), inline rows through theirs
    (INLINE_SERVICES). A refusal the form could not foresee (the object changed meanwhile)
    comes back as a message, with the whole save rolled back."""

    def save_through_service(self, request, obj, form) -> None:
        raise NotImplementedError

    def save_model(self, request, obj, form, change):
        self.save_through_service(request, obj, form)

    def save_formset(self, request, form, formset, change):
        instances = formset.save(commit=False)  # lists the changes, saves nothing
        if formset.model not in INLINE_SERVICES:
            if instances or formset.deleted_objects:  # only read-only inlines come here
                raise ApplicationError(
                    _("%(rows)s are changed elsewhere, not here")
                    % {"rows": formset.model._meta.verbose_name_plural}
                )
            return
        save, delete = INLINE_SERVICES[formset.model]
        for obj in formset.deleted_objects:
            delete(obj, request.user)
        for obj in instances:
            save(obj, request.user)
        formset.save_m2m()

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except ApplicationError as exc:
            messages.error(request, exc.message)
            return redirect(request.get_full_path())


class ServiceDeletesMixin:
    """Django's delete views (which refuse while protected objects depend on the object), with
    the delete itself done by the object's service, audited; a selection in one transaction.
    The service's own refusal (the object changed meanwhile) comes back as a message."""

    def delete_through_service(self, request, obj) -> None:
        raise NotImplementedError

    def _back_to(self, obj):
        opts = self.model._meta
        return redirect(reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk]))

    def delete_view(self, request, object_id, extra_context=None):
        try:
            return super().delete_view(request, object_id, extra_context)
        except ApplicationError as exc:
            messages.error(request, exc.message)
            return self._back_to(self.get_object(request, unquote(object_id)))

    def delete_model(self, request, obj):
        self.delete_through_service(request, obj)

    def delete_queryset(self, request, queryset):
        try:
            with transaction.atomic():
                for obj in queryset:
                    self.delete_through_service(request, obj)
        except ApplicationError as exc:  # changed between the page and the confirmation
            messages.error(request, exc.message)


class DeleteThroughServiceMixin(ServiceDeletesMixin):
    """Delete one object at a time through its service: the refusal (and why) is shown on the
    object's page instead of a confirmation; no bulk delete bypasses the checks."""

    def delete_problems(self, obj) -> list[str]:
        raise NotImplementedError

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def delete_view(self, request, object_id, extra_context=None):
        obj = self.get_object(request, unquote(object_id))
        if obj is not None:
            # Who may not delete is refused as such, before being told why it could not be.
            if not self.has_delete_permission(request, obj):
                raise PermissionDenied
            problems = self.delete_problems(obj)
            if problems:
                for problem in problems:
                    messages.error(request, problem)
                return self._back_to(obj)
        return super().delete_view(request, object_id, extra_context)


class ClusterCapacityInline(ViewOnlyInline):
    model = ClusterCapacity
    fields = ["resource", "capacity"]
    readonly_fields = fields
    verbose_name_plural = "cluster capacities (change them under Cluster capacities)"


class TeamNamespaceForm(ServiceErrorsForm):
    class Meta:
        model = TeamNamespace
        fields = ["name", "team", "cluster", "workload_class"]

    def clean(self):
        data = super().clean()
        if data.get("cluster") is not None:
            moved = TeamNamespace(
                pk=self.instance.pk,
                name=data.get("name") or self.instance.name,
                cluster=data["cluster"],
                team=data.get("team") or getattr(self.instance, "team", None),
            )
            self.check_with(team_namespace_check, team_namespace=moved)
        return data


class TeamNamespaceInline(admin.TabularInline):
    model = TeamNamespace
    form = TeamNamespaceForm
    extra = 0
    fields = ["name", "team", "cluster", "workload_class"]
    autocomplete_fields = ["team", "cluster"]
    show_change_link = True


class AllocationInline(ViewOnlyInline):
    model = Allocation
    fields = ["resource", "guarantee", "cap", "per_pod_max", "priority_classes", "version"]
    readonly_fields = fields
    verbose_name_plural = "allocations (change them with a quota request)"


@admin.register(Cluster)
class ClusterAdmin(SaveThroughServiceMixin, ServiceDeletesMixin, admin.ModelAdmin):
    # A sandbox URL typed without a scheme is the development sandbox's plain HTTP (said here,
    # as Django 6 will otherwise assume https).
    formfield_overrides = {**PLAIN_DECIMAL_FIELDS, models.URLField: {"assume_scheme": "http"}}
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
    actions = ["sync_now", "mode_enforce", "mode_report_only", "mode_shadow"]
    readonly_fields = ["sync_mode", "plan_generation", "preview_link", "backend_problems"]
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
        ("Rules", {"fields": ["max_cap_share", "top_priority_share", "gpu_cards"]}),
        ("Cost", {"fields": ["gpu_hour_price"]}),
        (
            "Suggestions",
            {
                "fields": [
                    "suggest_idle_price",
                    "suggest_borrowed_price",
                    "suggest_inference_borrowed_price",
                    "suggest_blocked_price",
                ],
                "description": "What the monthly suggestions weigh, per unit-hour: a "
                "guarantee left idle against demand that borrows or is blocked by a cap.",
            },
        ),
        (
            "Sync",
            {
                "fields": [
                    "sync_mode",
                    "plan_generation",
                    "kueue_cohort",
                    "kueue_cpu_pool",
                    "kueue_memory_pool_gib",
                    "yunikorn_namespace",
                    "preview_link",
                    "backend_problems",
                ],
                "description": "Switch the mode with the actions of the cluster list, so every "
                "change is audited.",
            },
        ),
    ]

    def save_through_service(self, request, obj, form) -> None:
        cluster_save(cluster=obj, acting_user=request.user, comment="Django admin")

    def delete_through_service(self, request, obj) -> None:
        cluster_delete(cluster=obj, acting_user=request.user, comment="Django admin")

    @admin.display(description="preview")
    def preview_link(self, obj: Cluster) -> str:
        if not obj.pk:
            return "-"
        from django.utils.html import format_html

        url = reverse("admin:quotas_cluster_preview", args=[obj.pk])
        return format_html('<a href="{}">Preview what a sync would change</a>', url)

    @admin.display(description="scheduler problems (last sync)")
    def backend_problems(self, obj: Cluster) -> str:
        from django.utils.html import format_html_join

        problems = cluster_backend_problems(cluster_ids=[obj.pk]).get(obj.pk) if obj.pk else None
        if not problems:
            return "-"
        return format_html_join("", "<p>{}</p>", ((p["message"],) for p in problems))

    def get_urls(self):
        return [
            path(
                "<int:cluster_id>/preview/",
                self.admin_site.admin_view(self.preview_view),
                name="quotas_cluster_preview",
            ),
            *super().get_urls(),
        ]

    def preview_view(self, request, cluster_id: int):
        cluster = get_object_or_404(Cluster, pk=cluster_id)
        if not self.has_view_permission(request, cluster):
            raise PermissionDenied
        error = ""
        try:
            changes = cluster_preview(cluster_id=cluster.pk)
        except KubeError as exc:
            changes, error = [], str(exc)
        context = {
            **self.admin_site.each_context(request),
            "title": _("Preview of a sync of %(cluster)s") % {"cluster": cluster.name},
            "cluster": cluster,
            "changes": changes,
            "error": error,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/quotas/cluster_preview.html", context)

    @admin.action(description=gettext_lazy("Sync now"), permissions=["change"])
    def sync_now(self, request, queryset):
        for cluster in queryset:
            with transaction.atomic():
                cluster_sync_request(cluster=cluster, acting_user=request.user, reason="sync now")
        count = queryset.count()
        messages.info(
            request,
            ngettext(
                "Sync requested for %(count)d cluster.",
                "Sync requested for %(count)d clusters.",
                count,
            )
            % {"count": count},
        )

    def _set_mode(self, request, queryset, mode: str) -> None:
        for cluster in queryset:
            cluster_set_sync_mode(
                cluster=cluster, mode=mode, acting_user=request.user, comment="Django admin"
            )
        count = queryset.count()
        messages.info(
            request,
            ngettext(
                "Sync mode set to %(mode)s for %(count)d cluster.",
                "Sync mode set to %(mode)s for %(count)d clusters.",
                count,
            )
            % {"mode": mode, "count": count},
        )

    @admin.action(
        description=gettext_lazy("Mode: enforce (write, restore drift)"), permissions=["change"]
    )
    def mode_enforce(self, request, queryset):
        self._set_mode(request, queryset, Cluster.SyncMode.ENFORCE)

    @admin.action(
        description=gettext_lazy("Mode: report only (write, report drift)"), permissions=["change"]
    )
    def mode_report_only(self, request, queryset):
        self._set_mode(request, queryset, Cluster.SyncMode.REPORT_ONLY)

    @admin.action(description=gettext_lazy("Mode: shadow (write nothing)"), permissions=["change"])
    def mode_shadow(self, request, queryset):
        self._set_mode(request, queryset, Cluster.SyncMode.SHADOW)


@admin.register(Resource)
class ResourceAdmin(SaveThroughServiceMixin, ServiceDeletesMixin, admin.ModelAdmin):
    list_display = ["name", "display_name", "kind", "unit", "gpu_model"]
    list_filter = ["kind", "gpu_model"]
    search_fields = ["name", "display_name", "gpu_model"]

    def save_through_service(self, request, obj, form) -> None:
        resource_save(resource=obj, acting_user=request.user, comment="Django admin")

    def delete_through_service(self, request, obj) -> None:
        resource_delete(resource=obj, acting_user=request.user, comment="Django admin")


class ClusterCapacityForm(ServiceErrorsForm):
    class Meta:
        model = ClusterCapacity
        fields = ["cluster", "resource", "capacity"]

    def clean(self):
        data = super().clean()
        # On a change, cluster and resource are read-only: they come from the row.
        cluster = data.get("cluster") or getattr(self.instance, "cluster", None)
        resource = data.get("resource") or getattr(self.instance, "resource", None)
        if cluster and resource and data.get("capacity") is not None:
            try:
                cluster_capacity_check(
                    cluster=cluster, resource=resource, capacity=data["capacity"]
                )
            except ApplicationError as exc:
                self.add_service_error(exc)
        return data


@admin.register(ClusterCapacity)
class ClusterCapacityAdmin(DeleteThroughServiceMixin, admin.ModelAdmin):
    form = ClusterCapacityForm
    formfield_overrides = PLAIN_DECIMAL_FIELDS
    list_display = ["cluster", "resource", "capacity"]
    list_select_related = ["cluster", "resource"]
    list_filter = ["cluster", "resource"]
    search_fields = ["cluster__name", "resource__name"]
    autocomplete_fields = ["cluster", "resource"]

    def get_readonly_fields(self, request, obj=None):
        return ["cluster", "resource"] if obj else []

    def save_model(self, request, obj, form, change):
        saved = cluster_capacity_set(
            cluster=obj.cluster,
            resource=obj.resource,
            capacity=obj.capacity,
            acting_user=request.user,
        )
        obj.pk = saved.pk

    def delete_problems(self, obj) -> list[str]:
        return cluster_capacity_delete_problems(capacity=obj)

    def delete_through_service(self, request, obj) -> None:
        cluster_capacity_delete(capacity=obj, acting_user=request.user)


class PriorityClassForm(ServiceErrorsForm):
    class Meta:
        model = PriorityClass
        fields = ["name", "value", "preempts", "description"]


@admin.register(PriorityClass)
class PriorityClassAdmin(DeleteThroughServiceMixin, admin.ModelAdmin):
    form = PriorityClassForm
    list_display = ["name", "value", "preempts", "description"]
    search_fields = ["name", "description"]

    def get_readonly_fields(self, request, obj=None):
        # Immutable in Kubernetes: a different value or preemption policy is a new class.
        return ["name", *PRIORITY_CLASS_IMMUTABLE] if obj else []

    def save_model(self, request, obj, form, change):
        priority_class_save(priority_class=obj, acting_user=request.user)

    def delete_problems(self, obj) -> list[str]:
        return priority_class_delete_problems(priority_class=obj)

    def delete_through_service(self, request, obj) -> None:
        priority_class_delete(priority_class=obj, acting_user=request.user)


class RunTimeLimitForm(ServiceErrorsForm):
    class Meta:
        model = RunTimeLimit
        fields = ["team_namespace", "priority_class", "max_seconds"]

    def clean(self):
        data = super().clean()
        ns = data.get("team_namespace") or getattr(self.instance, "team_namespace", None)
        pc = data.get("priority_class") or getattr(self.instance, "priority_class", None)
        if ns is not None and pc is not None:
            self.check_with(run_time_limit_check, team_namespace=ns, priority_class=pc)
        if data.get("max_seconds") is not None:
            self.check_with(run_time_seconds, value=data["max_seconds"])
        return data


@admin.register(RunTimeLimit)
class RunTimeLimitAdmin(ServiceDeletesMixin, admin.ModelAdmin):
    form = RunTimeLimitForm
    list_display = ["team_namespace", "priority_class", "max_seconds", "updated_at"]
    list_select_related = ["team_namespace__cluster", "priority_class"]
    list_filter = ["team_namespace__cluster", "priority_class"]
    search_fields = ["team_namespace__name", "priority_class__name"]
    autocomplete_fields = ["team_namespace", "priority_class"]

    def get_readonly_fields(self, request, obj=None):
        return ["team_namespace", "priority_class"] if obj else []

    def save_model(self, request, obj, form, change):
        saved = run_time_limit_set(
            team_namespace=obj.team_namespace,
            priority_class=obj.priority_class,
            max_seconds=obj.max_seconds,
            acting_user=request.user,
        )
        obj.pk = saved.pk

    def delete_through_service(self, request, obj) -> None:
        run_time_limit_delete(limit=obj, acting_user=request.user)


class TeamMembershipInline(admin.TabularInline):
    model = TeamMembership
    extra = 0
    autocomplete_fields = ["user"]


class TeamForm(ServiceErrorsForm):
    class Meta:
        model = Team
        fields = ["slug", "name", "description", "parent", "contact_email", "gpu_ceiling"]

    def clean(self):
        data = super().clean()
        team = Team(
            pk=self.instance.pk,
            slug=data.get("slug") or self.instance.slug,
            parent=data.get("parent"),
        )
        self.check_with(team_check, team=team)
        return data


@admin.register(Team)
class TeamAdmin(SaveThroughServiceMixin, ServiceDeletesMixin, admin.ModelAdmin):
    form = TeamForm
    list_display = ["slug", "name", "parent", "contact_email", "gpu_ceiling"]
    list_select_related = ["parent"]
    list_filter = ["parent"]
    search_fields = ["slug", "name", "memberships__user__username"]
    autocomplete_fields = ["parent"]
    inlines = [TeamMembershipInline, TeamNamespaceInline]

    def save_through_service(self, request, obj, form) -> None:
        team_save(team=obj, acting_user=request.user, comment="Django admin")

    def delete_through_service(self, request, obj) -> None:
        team_delete(team=obj, acting_user=request.user, comment="Django admin")


@admin.register(TeamMembership)
class TeamMembershipAdmin(SaveThroughServiceMixin, ServiceDeletesMixin, admin.ModelAdmin):
    list_display = ["user", "team", "role"]
    list_select_related = ["user", "team"]
    list_filter = ["role", "team"]
    search_fields = ["user__username", "user__email", "team__slug"]
    autocomplete_fields = ["user", "team"]

    def save_through_service(self, request, obj, form) -> None:
        _membership_save(obj, request.user)

    def delete_through_service(self, request, obj) -> None:
        _membership_delete(obj, request.user)


@admin.register(TeamNamespace)
class TeamNamespaceAdmin(SaveThroughServiceMixin, ServiceDeletesMixin, admin.ModelAdmin):
    form = TeamNamespaceForm
    list_display = ["name", "cluster", "team", "workload_class", "shadow"]
    list_select_related = ["cluster", "team"]
    list_filter = ["cluster", "workload_class", "shadow", "team__parent"]
    search_fields = ["name", "team__slug", "team__name"]
    autocomplete_fields = ["team", "cluster"]
    readonly_fields = ["shadow"]
    inlines = [AllocationInline]
    actions = ["shadow_on", "shadow_off"]
    # Deleting a namespace would delete its allocations and their history: Django's delete
    # views refuse it because allocations cannot be deleted here (see AllocationAdmin), and
    # the service refuses it too.

    def save_through_service(self, request, obj, form) -> None:
        _namespace_save(obj, request.user)

    def delete_through_service(self, request, obj) -> None:
        _namespace_delete(obj, request.user)

    @admin.action(
        description=gettext_lazy("Shadow: compute but do not write (canary)"),
        permissions=["change"],
    )
    def shadow_on(self, request, queryset):
        for ns in queryset:
            team_namespace_set_shadow(team_namespace=ns, shadow=True, acting_user=request.user)

    @admin.action(
        description=gettext_lazy("Leave shadow: write this namespace"), permissions=["change"]
    )
    def shadow_off(self, request, queryset):
        for ns in queryset:
            team_namespace_set_shadow(team_namespace=ns, shadow=False, acting_user=request.user)


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
    list_select_related = ["team_namespace__cluster", "resource"]
    list_filter = ["team_namespace__cluster", "resource", "team_namespace__workload_class"]
    search_fields = ["team_namespace__name", "team_namespace__team__slug", "resource__name"]
    readonly_fields = [f.name for f in Allocation._meta.fields]
    inlines = [AllocationVersionInline]

    # Read-only: an allocation changes through a quota request (rules, approval, version,
    # audit, sync); deleting one here would drop its history unaudited and unsynced.
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(AllocationVersion)
class AllocationVersionAdmin(admin.ModelAdmin):
    list_display = ["allocation", "version", "guarantee", "cap", "changed_at", "changed_by"]
    list_select_related = [
        "allocation__team_namespace__cluster",
        "allocation__resource",
        "changed_by",
    ]
    list_filter = ["allocation__team_namespace__cluster", "allocation__resource"]
    search_fields = ["allocation__team_namespace__name", "reason", "source"]
    readonly_fields = [f.name for f in AllocationVersion._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records written by the portal itself: visible to admins and auditors, never edited."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class SyncObjectResultInline(admin.TabularInline):
    """What the run changed or failed on; every object is in the sync object results list."""

    model = SyncObjectResult
    extra = 0
    can_delete = False
    verbose_name_plural = "changes and errors"

    def get_queryset(self, request):
        return super().get_queryset(request).exclude(action=SyncObjectResult.Action.UNCHANGED)

    fields = ["action", "kind", "namespace", "name", "diff", "error"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(SyncRun)
class SyncRunAdmin(ReadOnlyAdmin):
    list_display = [
        "cluster",
        "trigger",
        "mode",
        "status",
        "started_at",
        "duration_ms",
        "objects_total",
        "counts",
        "generation",
    ]
    list_select_related = ["cluster"]
    list_filter = ["cluster", "status", "trigger", "mode"]
    search_fields = ["cluster__name", "error", "worker"]
    readonly_fields = [f.name for f in SyncRun._meta.fields]
    inlines = [SyncObjectResultInline]
    date_hierarchy = "started_at"


@admin.register(SyncRequest)
class SyncRequestAdmin(ReadOnlyAdmin):
    list_display = [
        "cluster",
        "status",
        "created_at",
        "requested_by",
        "reason",
        "attempts",
        "completed_at",
    ]
    list_select_related = ["cluster", "requested_by"]
    list_filter = ["status", "cluster"]
    search_fields = ["reason", "last_error", "cluster__name"]
    readonly_fields = [f.name for f in SyncRequest._meta.fields]


@admin.register(DriftEvent)
class DriftEventAdmin(ReadOnlyAdmin):
    list_display = ["detected_at", "cluster", "kind", "namespace", "name", "restored", "changes"]
    list_select_related = ["cluster"]
    list_filter = ["cluster", "kind", "restored"]
    search_fields = ["namespace", "name"]
    readonly_fields = [f.name for f in DriftEvent._meta.fields]
    date_hierarchy = "detected_at"


@admin.register(ManagedObject)
class ManagedObjectAdmin(ReadOnlyAdmin):
    list_display = ["cluster", "kind", "namespace", "name", "generation", "applied_at"]
    list_select_related = ["cluster"]
    list_filter = ["cluster", "kind"]
    search_fields = ["namespace", "name"]
    readonly_fields = [f.name for f in ManagedObject._meta.fields]


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = [
        "seq",
        "created_at",
        "actor_username",
        "action",
        "target_repr",
        "before",
        "after",
        "comment",
    ]
    list_filter = ["action", "target_type"]
    search_fields = ["target_repr", "comment", "actor__username"]
    readonly_fields = [f.name for f in AuditEvent._meta.fields]
    date_hierarchy = "created_at"


@admin.register(SyncLease)
class SyncLeaseAdmin(ReadOnlyAdmin):
    list_display = ["cluster", "holder", "expires_at", "epoch"]
    list_select_related = ["cluster"]
    readonly_fields = [f.name for f in SyncLease._meta.fields]


@admin.register(AuditChainHead)
class AuditChainHeadAdmin(ReadOnlyAdmin):
    list_display = ["last_seq", "last_hash"]
    readonly_fields = [f.name for f in AuditChainHead._meta.fields]


@admin.register(SyncObjectResult)
class SyncObjectResultAdmin(ReadOnlyAdmin):
    list_display = ["run", "action", "kind", "namespace", "name"]
    list_select_related = ["run__cluster"]
    list_filter = ["action", "kind", "run__cluster"]
    search_fields = ["namespace", "name", "error"]
    readonly_fields = [f.name for f in SyncObjectResult._meta.fields]


# --- people and role groups: Django's own pages, saved through quotas.people -----------------


class GroupForm(ServiceErrorsForm):
    class Meta:
        model = Group
        fields = ["name", "permissions"]

    def clean(self):
        data = super().clean()
        if data.get("name"):
            self.check_with(group_check, group=Group(pk=self.instance.pk, name=data["name"]))
        return data


admin.site.unregister(Group)
admin.site.unregister(User)


@admin.register(Group)
class PortalGroupAdmin(SaveThroughServiceMixin, DeleteThroughServiceMixin, GroupAdmin):
    form = GroupForm

    def save_through_service(self, request, obj, form) -> None:
        group_save(
            group=obj,
            permissions=form.cleaned_data.get("permissions"),
            acting_user=request.user,
            comment="Django admin",
        )

    def save_related(self, request, form, formsets, change):
        pass  # the permissions were saved with the group, in its audited change

    def delete_problems(self, obj) -> list[str]:
        return group_delete_problems(group=obj)

    def delete_through_service(self, request, obj) -> None:
        group_delete(group=obj, acting_user=request.user, comment="Django admin")


@admin.register(User)
class PortalUserAdmin(SaveThroughServiceMixin, DeleteThroughServiceMixin, UserAdmin):
    """Django's user pages; a save (groups and permissions with it) and a delete are one
    audited change each, with the portal roles before and after (quotas.people)."""

    def save_through_service(self, request, obj, form) -> None:
        user_save(
            user=obj,
            groups=form.cleaned_data.get("groups"),
            user_permissions=form.cleaned_data.get("user_permissions"),
            acting_user=request.user,
            comment="Django admin",
        )

    def save_related(self, request, form, formsets, change):
        # The groups and permissions were saved with the user, in its audited change.
        for formset in formsets:
            self.save_formset(request, form, formset, change=change)

    def delete_problems(self, obj) -> list[str]:
        return user_delete_problems(user=obj)

    def delete_through_service(self, request, obj) -> None:
        user_delete(user=obj, acting_user=request.user, comment="Django admin")
