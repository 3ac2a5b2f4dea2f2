from django.urls import path

from approvals.api import budgets, discussion, grants, preview, requests, suggestions, views

urlpatterns = [
    path("budgets/", budgets.Budgets.as_view(), name="api-budgets"),
    path("requests/", views.RequestList.as_view(), name="api-requests"),
    path("requests/preview/", preview.DraftPreview.as_view(), name="api-requests-preview"),
    path("requests/<int:pk>/", requests.RequestResource.as_view(), name="api-request"),
    path(
        "requests/<int:pk>/preview/", preview.RequestPreview.as_view(), name="api-request-preview"
    ),
    path(
        "requests/<int:pk>/comments/",
        discussion.RequestComments.as_view(),
        name="api-request-comments",
    ),
    path("requests/<int:pk>/extend/", grants.RequestExtend.as_view(), name="api-request-extend"),
]
urlpatterns += [
    path(f"requests/<int:pk>/{action}/", view.as_view(), name=f"api-request-{action}")
    for action, view in requests.ACTION_VIEWS.items()
]
urlpatterns += [
    path(
        "suggestions/<int:pk>/request/",
        suggestions.SuggestionRequest.as_view(),
        name="api-suggestion-request",
    ),
]
