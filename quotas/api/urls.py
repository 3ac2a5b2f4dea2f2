from django.urls import path

from quotas.api import allocations, clusters, run_times, sync, views, waiting
from quotas.audit import api as audit

urlpatterns = [
    path("teams/", views.TeamList.as_view(), name="api-teams"),
    path("teams/<slug:slug>/", views.TeamDetail.as_view(), name="api-team"),
    path("namespaces/", allocations.NamespaceList.as_view(), name="api-namespaces"),
    path(
        "namespaces/<int:pk>/waiting/",
        waiting.NamespaceWaiting.as_view(),
        name="api-namespace-waiting",
    ),
    path("allocations/", views.AllocationList.as_view(), name="api-allocations"),
    path("allocations/<int:pk>/", allocations.AllocationDetail.as_view(), name="api-allocation"),
    path(
        "allocations/<int:pk>/versions/",
        allocations.AllocationVersionList.as_view(),
        name="api-allocation-versions",
    ),
    path("run-time-limits/", run_times.RunTimeLimitList.as_view(), name="api-run-time-limits"),
    path(
        "run-time-limits/<int:pk>/",
        run_times.RunTimeLimitDetail.as_view(),
        name="api-run-time-limit",
    ),
    path("clusters/", views.ClusterList.as_view(), name="api-clusters"),
    path("clusters/<slug:name>/", clusters.ClusterDetail.as_view(), name="api-cluster"),
    path("plan/violations/", views.PlanViolationList.as_view(), name="api-plan-violations"),
    path("sync-runs/", sync.SyncRunList.as_view(), name="api-sync-runs"),
    path("sync-runs/<int:pk>/", sync.SyncRunDetail.as_view(), name="api-sync-run"),
    path("drift/", sync.DriftList.as_view(), name="api-drift"),
    path("audit-events/", audit.AuditEventList.as_view(), name="api-audit-events"),
]
