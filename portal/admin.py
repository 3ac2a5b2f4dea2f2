from django.contrib import admin

from portal.models import WorkerHeartbeat


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):
    list_display = ["hostname", "last_seen", "beats"]
    search_fields = ["hostname"]
    readonly_fields = ["hostname", "last_seen", "beats"]
