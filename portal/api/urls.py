"""The REST API, version 1: every app's API under one prefix."""

from django.urls import include, path

urlpatterns = [
    path("", include("quotas.api.urls")),
    path("", include("approvals.api.urls")),
]
