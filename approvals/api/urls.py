from django.urls import path

from approvals.api import suggestions, views

urlpatterns = [
    path("requests/", views.RequestList.as_view(), name="api-requests"),
    path("requests/<int:pk>/", views.RequestDetail.as_view(), name="api-request"),
]
urlpatterns += [
    path(f"requests/<int:pk>/{action}/", view.as_view(), name=f"api-request-{action}")
    for action, view in views.ACTION_VIEWS.items()
]
urlpatterns += [
    path(
        "suggestions/<int:pk>/request/",
        suggestions.SuggestionRequest.as_view(),
        name="api-suggestion-request",
    ),
]
