"""Django admin for requests: read the three value sets side by side; decide via actions."""

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from approvals.access import may, may_decide
from approvals.lifecycle import request_approve, request_changes, request_reject
from approvals.models import Approval, ApprovalPolicy, QuotaRequest, RequestComment, RequestLine
from approvals.policy.clusters import approval_policy_save
from approvals.preview import request_preview
from common.amounts import PLAIN_DECIMAL_FIELDS
from common.errors import ApplicationError
from quotas.kube.client import KubeError


class RequestLineInline(admin.TabularInline):
    model = RequestLine
    extra = 0
    can_delete = False
    fields = [
        "team_namespace",
        "resource",
        "current_guarantee",
        "current_cap",
        "requested_guarantee",
        "requested_cap",
        "decided_guarantee",
        "decided_cap",
        "applied_version",
    ]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


class ApprovalInline(admin.TabularInline):
    model = Approval
    extra = 0
    can_delete = False
    fields = ["admin", "created_at", "comment"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(QuotaRequest)
class QuotaRequestAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "team",
        "status",
        "kind",
        "requested_by",
        "created_at",
        "approvals_needed",
        "auto_approved",
        "ends_at",
    ]
    list_select_related = ["team", "requested_by"]
    list_filter = ["status", "kind", "auto_approved", "team"]
    search_fields = ["justification", "team__slug", "requested_by__username"]
    inlines = [RequestLineInline, ApprovalInline]
    actions = ["approve", "reject", "ask_for_changes"]
    date_hierarchy = "created_at"

    def get_readonly_fields(self, request, obj=None):
        return [*(f.name for f in QuotaRequest._meta.fields), "sync_requests", "preview_link"]

    @admin.display(description="preview")
    def preview_link(self, obj: QuotaRequest) -> str:
        if not obj.pk:
            return "-"
        url = reverse("admin:approvals_quotarequest_preview", args=[obj.pk])
        return format_html('<a href="{}">What approving it would change in the clusters</a>', url)

    def get_urls(self):
        return [
            path(
                "<int:request_id>/preview/",
                self.admin_site.admin_view(self.preview_view),
                name="approvals_quotarequest_preview",
            ),
            *super().get_urls(),
        ]

    def preview_view(self, request, request_id: int):
        quota_request = get_object_or_404(QuotaRequest, pk=request_id)
        if not self.has_view_permission(request, quota_request):
            raise DjangoPermissionDenied
        access = may(request.user, quota_request, "preview")
        if not access:
            raise DjangoPermissionDenied(access.message)
        error = ""
        try:
            clusters = request_preview(quota_request)
        except KubeError as exc:
            clusters, error = {}, str(exc)
        context = {
            **self.admin_site.each_context(request),
            "title": _("Preview of request #%(id)s") % {"id": quota_request.pk},
            "quota_request": quota_request,
            "clusters": clusters,
            "error": error,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/approvals/request_preview.html", context)

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_decide_permission(self, request) -> bool:
        """The decision actions are offered to those the rulebook lets decide (platform
        admins); each request is then refused or decided by the service, as on its page."""
        return self.has_change_permission(request) and may_decide(request.user)

    def _each(self, request, queryset, action, done) -> None:
        """``done(count)``: the message saying how many requests the action changed."""
        ok = 0
        for quota_request in queryset:
            try:
                action(quota_request)
                ok += 1
            except ApplicationError as exc:
                messages.error(
                    request,
                    _("request #%(id)s: %(problem)s")
                    % {"id": quota_request.pk, "problem": exc.message},
                )
        if ok:
            messages.success(request, done(ok))

    @admin.action(description=gettext_lazy("Approve (as requested)"), permissions=["decide"])
    def approve(self, request, queryset):
        self._each(
            request,
            queryset,
            lambda r: request_approve(request=r, acting_user=request.user, comment="Django admin"),
            lambda n: (
                ngettext("%(count)d request approved.", "%(count)d requests approved.", n)
                % {"count": n}
            ),
        )

    @admin.action(description=gettext_lazy("Reject"), permissions=["decide"])
    def reject(self, request, queryset):
        self._each(
            request,
            queryset,
            lambda r: request_reject(
                request=r, acting_user=request.user, comment="rejected in Django admin"
            ),
            lambda n: (
                ngettext("%(count)d request rejected.", "%(count)d requests rejected.", n)
                % {"count": n}
            ),
        )

    @admin.action(description=gettext_lazy("Ask for changes"), permissions=["decide"])
    def ask_for_changes(self, request, queryset):
        self._each(
            request,
            queryset,
            lambda r: request_changes(
                request=r, acting_user=request.user, comment="changes asked in Django admin"
            ),
            lambda n: (
                ngettext(
                    "%(count)d request sent back for changes.",
                    "%(count)d requests sent back for changes.",
                    n,
                )
                % {"count": n}
            ),
        )


@admin.register(ApprovalPolicy)
class ApprovalPolicyAdmin(admin.ModelAdmin):
    formfield_overrides = PLAIN_DECIMAL_FIELDS
    list_display = [
        "cluster",
        "auto_approve_decreases",
        "auto_approve_increase_max",
        "two_admins_above",
        "two_admins_for_higher_class",
    ]
    list_select_related = ["cluster"]
    autocomplete_fields = ["cluster"]

    def save_model(self, request, obj, form, change):
        approval_policy_save(policy=obj, acting_user=request.user)  # audited

    def has_delete_permission(self, request, obj=None):
        return False  # loosening to the defaults is an edit, audited like any other


@admin.register(RequestLine)
class RequestLineAdmin(admin.ModelAdmin):
    list_display = [
        "request",
        "team_namespace",
        "resource",
        "current_cap",
        "requested_cap",
        "decided_cap",
    ]
    list_select_related = ["request", "team_namespace__cluster", "resource"]
    list_filter = ["resource", "team_namespace__cluster"]
    search_fields = ["team_namespace__name", "request__justification"]

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in RequestLine._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Approval)
class ApprovalAdmin(admin.ModelAdmin):
    list_display = ["request", "admin", "created_at", "comment"]
    list_select_related = ["request", "admin"]
    search_fields = ["admin__username", "comment"]

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in Approval._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(RequestComment)
class RequestCommentAdmin(admin.ModelAdmin):
    """Read only: comments are written on the request's page or the API (audited there)."""

    list_display = ["request", "author", "created_at", "text"]
    list_select_related = ["request", "author"]
    search_fields = ["author__username", "text"]

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in RequestComment._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
