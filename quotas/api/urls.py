from django.urls import path

from quotas.api import views

urlpatterns = [
    path("teams/", views.TeamList.as_view(), name="api-teams"),
    path("teams/<slug:slug>/", views.TeamDetail.as_view(), name="api-team"),
    path("allocations/", views.AllocationList.as_view(), name="api-allocations"),
    path("clusters/", views.ClusterList.as_view(), name="api-clusters"),
    path("plan/violations/", views.PlanViolationList.as_view(), name="api-plan-violations"),
]
