"""The filters of the usage and suggestion lists, shared by the pages and the API (the rules of
quotas.filtersets: names, not ids; a malformed value is an error naming the parameter)."""

import django_filters

from common.filtersets import PortalFilterSet, one_of, period_form
from quotas.filtersets import (
    DayFilter,
    MonthFilter,
    cluster_filter,
    name_filter,
    resource_filter,
    team_filter,
)
from usage.models import Suggestion, SuggestionBacktest, UsageDaily


class SuggestionFilterSet(PortalFilterSet):
    """Suggestions: ?cluster=&team=&month=YYYY-MM, all optional."""

    cluster = cluster_filter("cluster")
    team = team_filter("team_namespace__team")
    month = MonthFilter(field_name="month", help_text="Month suggested for, as YYYY-MM.")

    class Meta:
        model = Suggestion
        fields = ["cluster", "team", "month"]


class SuggestionBacktestFilterSet(PortalFilterSet):
    """How the suggestions did: ?cluster=&resource=&month=YYYY-MM&policy=, all optional."""

    cluster = cluster_filter("cluster")
    resource = resource_filter("resource")
    month = MonthFilter(field_name="month", help_text="Month scored, as YYYY-MM.")
    policy = django_filters.ChoiceFilter(
        choices=SuggestionBacktest.Policy.choices,
        help_text="suggested (this method), equal_split, seed_rule or hindsight.",
        error_messages=one_of(SuggestionBacktest.Policy.choices),
    )

    class Meta:
        model = SuggestionBacktest
        fields = ["cluster", "resource", "month", "policy"]


USAGE_MAX_DAYS = 400
DAY_ERRORS = {"required": "required, a day as YYYY-MM-DD"}


class UsageDailyFilterSet(PortalFilterSet):
    """Daily usage: ?start=&end= (days, inclusive, required, at most USAGE_MAX_DAYS apart) and
    ?cluster=&team=&namespace=&resource=, optional."""

    start = DayFilter(
        field_name="day",
        lookup_expr="gte",
        required=True,
        help_text="First day (YYYY-MM-DD).",
        error_messages=DAY_ERRORS,
    )
    end = DayFilter(
        field_name="day",
        lookup_expr="lte",
        required=True,
        help_text=f"Last day (YYYY-MM-DD), at most {USAGE_MAX_DAYS - 1} days after start.",
        error_messages=DAY_ERRORS,
    )
    cluster = cluster_filter("team_namespace__cluster")
    team = team_filter("team_namespace__team")
    namespace = name_filter("team_namespace__name", "Namespace name.")
    resource = name_filter("resource__name", "Resource name, e.g. nvidia.com/gpu.")

    class Meta:
        model = UsageDaily
        fields = ["start", "end", "cluster", "team", "namespace", "resource"]
        form = period_form("start", "end", max_days=USAGE_MAX_DAYS)
