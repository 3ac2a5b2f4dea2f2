"""URLs of the request pages, mounted at /requests/."""

from django.urls import path

from approvals import views, views_form, views_list, views_suggestions

urlpatterns = [
    path("", views_list.request_list, name="requests-list"),
    path("new/", views_form.request_new, name="requests-new"),
    path("validate/", views_form.request_validate, name="requests-validate"),
    path(
        "from-suggestion/<int:pk>/",
        views_suggestions.suggestion_request,
        name="suggestion-request",
    ),
    path("<int:pk>/", views.request_detail, name="requests-detail"),
    path("<int:pk>/edit/", views_form.request_edit, name="requests-edit"),
    path("<int:pk>/validate/", views_form.request_validate_edit, name="requests-validate-edit"),
    path("<int:pk>/preview/", views.request_preview_page, name="requests-preview"),
    path(
        "<int:pk>/<str:action>/",
        views.request_action,
        name="requests-action",
    ),
]
