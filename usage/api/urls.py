from django.urls import path

from usage.api import backtests, showback, suggestions, usage

urlpatterns = [
    path("suggestions/", suggestions.SuggestionList.as_view(), name="api-suggestions"),
    path(
        "suggestions/backtest/",
        backtests.SuggestionBacktestList.as_view(),
        name="api-suggestion-backtests",
    ),
    path("suggestions/<int:pk>/", suggestions.SuggestionDetail.as_view(), name="api-suggestion"),
    path("usage/canary/", suggestions.CanaryMetrics.as_view(), name="api-usage-canary"),
    path("usage/daily/", usage.UsageDailyList.as_view(), name="api-usage-daily"),
    path("showback/", showback.Showback.as_view(), name="api-showback"),
]
