from django.urls import path

from approvals.api import suggestions, views

urlpatterns = [
    path("requests/", views.RequestList.as_view(), name="api-requests"),
    path("requests/<int:pk>/", views.RequestDetail.as_view(), name="api-request"),
]
urlpatterns += [
    path(
        f"requests/<int:pk>/{action}/",
        views.RequestAction.as_view(),
        {"action": action},
        name=f"api-request-{action}",
    )
    for action in views.RequestAction.actions
]
urlpatterns += [
    path(
        "suggestions/<int:pk>/request/",
        suggestions.SuggestionRequest.as_view(),
        name="api-suggestion-request",
    ),
]
