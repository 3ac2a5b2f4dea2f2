"""URLs of the request pages, mounted at /requests/."""

from django.urls import path

from approvals.views import detail, form, live, suggestions
from approvals.views import list as request_list

urlpatterns = [
    path("", request_list.request_list, name="requests-list"),
    path("new/", form.request_new, name="requests-new"),
    path("validate/", form.request_validate, name="requests-validate"),
    path("live/", live.request_list_live, name="requests-live-list"),
    path(
        "from-suggestion/<int:pk>/",
        suggestions.suggestion_request,
        name="suggestion-request",
    ),
    path("<int:pk>/", detail.request_detail, name="requests-detail"),
    path("<int:pk>/edit/", form.request_edit, name="requests-edit"),
    path("<int:pk>/validate/", form.request_validate_edit, name="requests-validate-edit"),
    path("<int:pk>/preview/", detail.request_preview_page, name="requests-preview"),
    path("<int:pk>/live/", live.request_live, name="requests-live"),
    path("<int:pk>/comments/", detail.request_comment, name="requests-comment"),
    path("<int:pk>/extend/", detail.request_extend, name="requests-extend"),
    path("bulk/", request_list.requests_bulk, name="requests-bulk"),
    path(
        "<int:pk>/<str:action>/",
        detail.request_action,
        name="requests-action",
    ),
]
