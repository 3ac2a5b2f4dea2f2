from django.contrib import admin
from django.utils.translation import gettext_lazy

from common.api.idempotency import IdempotencyKey
from portal.models import ApiToken, SsoIdentity, WorkerHeartbeat
from portal.tokens import api_token_revoke


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):
    list_display = ["hostname", "last_seen", "beats"]
    search_fields = ["hostname"]
    readonly_fields = ["hostname", "last_seen", "beats"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Read-only: tokens are made on the API tokens page or with `manage.py create_api_token`;
    the hash is never shown. Revoking goes through the same service as the page (audited)."""

    list_display = [
        "name",
        "user",
        "label",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
    ]
    list_select_related = ["user"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "public_id", "user__username"]
    fields = ["name", "user", "label", "created_at", "expires_at", "last_used_at", "revoked_at"]
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    @admin.action(description=gettext_lazy("Revoke the selected tokens"), permissions=["delete"])
    def revoke(self, request, queryset):
        for token in queryset.filter(revoked_at__isnull=True):
            api_token_revoke(token=token, acting_user=request.user, comment="revoked in the admin")

    actions = ["revoke"]


@admin.register(IdempotencyKey)
class IdempotencyKeyAdmin(admin.ModelAdmin):
    """Read-only: which API retries were answered from a stored response. Deleting a key lets
    a retry with it run again."""

    list_display = ["key", "user", "method", "path", "state", "response_status", "created_at"]
    list_select_related = ["user"]
    list_filter = ["state", "method"]
    search_fields = ["key", "user__username", "path"]
    readonly_fields = [f.name for f in IdempotencyKey._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(SsoIdentity)
class SsoIdentityAdmin(admin.ModelAdmin):
    """Read-only: identities are made at a user's first single sign-on (portal.sso.services,
    audited) and go with their user; deactivating the user refuses their next sign-in."""

    list_display = ["user", "issuer", "subject", "created_at", "last_login_at"]
    list_select_related = ["user"]
    list_filter = ["issuer"]
    search_fields = ["user__username", "subject"]
    fields = ["user", "issuer", "subject", "created_at", "last_login_at"]
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
