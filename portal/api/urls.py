"""The REST API, version 1: every app's API under one prefix."""

from django.urls import include, path, re_path

from portal.api.views import ApiRoot, api_not_found

urlpatterns = [
    path("", ApiRoot.as_view(), name="api-root"),
    path("", include("quotas.api.urls")),
    path("", include("usage.api.urls")),
    path("", include("approvals.api.urls")),
]
# Last: whatever matched nothing above, line breaks too ("." alone stops at one).
urlpatterns += [re_path(r"^(?P<unmatched>(?s:.*))$", api_not_found, name="api-not-found")]
