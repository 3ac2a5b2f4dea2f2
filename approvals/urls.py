"""URLs of the request pages, mounted at /requests/."""

from django.urls import path

from approvals import views, views_suggestions

urlpatterns = [
    path("", views.request_list, name="requests-list"),
    path("new/", views.request_new, name="requests-new"),
    path(
        "from-suggestion/<int:pk>/",
        views_suggestions.suggestion_request,
        name="suggestion-request",
    ),
    path("<int:pk>/", views.request_detail, name="requests-detail"),
    path("<int:pk>/edit/", views.request_edit, name="requests-edit"),
    path("<int:pk>/preview/", views.request_preview_page, name="requests-preview"),
    path(
        "<int:pk>/<str:action>/",
        views.request_action,
        name="requests-action",
    ),
]
