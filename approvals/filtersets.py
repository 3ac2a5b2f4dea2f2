"""The filters of the request list, shared by the page (/requests/) and ``GET
/api/v1/requests/``."""

import django_filters

from approvals.models import QuotaRequest
from approvals.selectors import requests_awaiting_decision_by
from common.filtersets import PortalFilterSet, StrictBooleanFilter, one_of
from quotas.filtersets import cluster_filter, team_filter
from quotas.roles import is_platform_admin

S = QuotaRequest.Status


class RequestFilterSet(PortalFilterSet):
    """?status=&team=&cluster=&kind=&created_after=&created_before=&waiting=, all optional
    (a request's age: created_after/created_before, days)."""

    status = django_filters.ChoiceFilter(
        choices=S.choices,
        empty_label="all statuses",
        help_text="Request status.",
        error_messages=one_of(S.choices),
    )
    team = team_filter("team")
    cluster = cluster_filter("lines__team_namespace__cluster")
    kind = django_filters.ChoiceFilter(
        choices=QuotaRequest.Kind.choices,
        empty_label="all kinds",
        help_text="Permanent change or temporary grant.",
        error_messages=one_of(QuotaRequest.Kind.choices),
    )
    created_after = django_filters.DateFilter(
        field_name="created_at",
        lookup_expr="date__gte",
        label="created from",
        help_text="Created on or after this day (YYYY-MM-DD, the portal's time zone).",
        error_messages={"invalid": "give a day as YYYY-MM-DD"},
    )
    created_before = django_filters.DateFilter(
        field_name="created_at",
        lookup_expr="date__lte",
        label="created to",
        help_text="Created on or before this day (YYYY-MM-DD, the portal's time zone).",
        error_messages={"invalid": "give a day as YYYY-MM-DD"},
    )
    waiting = StrictBooleanFilter(
        method="filter_waiting",
        label="waiting for me",
        help_text="Only submitted requests this platform admin has yet to decide "
        "(not their own, not approved by them yet); ignored for everyone else.",
    )

    class Meta:
        model = QuotaRequest
        fields = ["status", "team", "cluster", "kind", "created_after", "created_before", "waiting"]

    def filter_queryset(self, queryset):
        queryset = super().filter_queryset(queryset)
        # A request with several lines on the cluster would be listed once per line.
        return queryset.distinct() if self.form.cleaned_data.get("cluster") else queryset

    def filter_waiting(self, queryset, name, value):
        user = self.request.user if self.request is not None else None
        if not value or user is None or not is_platform_admin(user):
            return queryset
        return requests_awaiting_decision_by(user, queryset)
