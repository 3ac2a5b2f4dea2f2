"""The REST API, version 1: every app's API under one prefix."""

from django.urls import include, path

from portal.api.views import ApiRoot

urlpatterns = [
    path("", ApiRoot.as_view(), name="api-root"),
    path("", include("quotas.api.urls")),
    path("", include("approvals.api.urls")),
]
