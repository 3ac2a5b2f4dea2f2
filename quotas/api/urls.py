from django.urls import path

from quotas.api import suggestions, views

urlpatterns = [
    path("teams/", views.TeamList.as_view(), name="api-teams"),
    path("teams/<slug:slug>/", views.TeamDetail.as_view(), name="api-team"),
    path("allocations/", views.AllocationList.as_view(), name="api-allocations"),
    path("clusters/", views.ClusterList.as_view(), name="api-clusters"),
    path("plan/violations/", views.PlanViolationList.as_view(), name="api-plan-violations"),
    path("suggestions/", suggestions.SuggestionList.as_view(), name="api-suggestions"),
    path("suggestions/<int:pk>/", suggestions.SuggestionDetail.as_view(), name="api-suggestion"),
    path("usage/canary/", suggestions.CanaryMetrics.as_view(), name="api-usage-canary"),
]
