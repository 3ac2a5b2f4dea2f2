"""The filters of the request list, shared by the page (/requests/) and ``GET
/api/v1/requests/``."""

from datetime import timedelta

import django_filters
from django import forms
from django.db.models import Exists, F, Min, OuterRef, QuerySet
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from approvals.access import restrict
from approvals.models import QuotaRequest, RequestLine
from common.filtersets import PortalFilterSet, StrictBooleanFilter, one_of
from quotas.filtersets import TEAM_CHOICE_FIELDS, cluster_filter, team_filter
from quotas.models import Team
from quotas.roles import is_platform_admin

S = QuotaRequest.Status
# The page's date pickers send YYYY-MM-DD, as the API takes it.
DAY = forms.DateInput(attrs={"type": "date"})

# How far back an age filter reaches (days): far enough for any queue, small enough that the
# date arithmetic never overflows.
MAX_AGE_DAYS = 3650


class DaysFilter(django_filters.NumberFilter):
    """A whole number of days, 0 to MAX_AGE_DAYS; anything else names the parameter's rule."""

    field_class = forms.IntegerField

    def get_max_validator(self):
        return None  # the field's own max_value says it in days


class RequestOrderingFilter(django_filters.OrderingFilter):
    """?ordering=submitted|team|cluster|status|created, "-" for descending, several comma-
    separated. Requests never submitted sort last either way; ties go by id. A request with
    lines on several clusters sorts by the first cluster name."""

    def filter(self, qs, value):
        if not value:
            return qs
        params = [param for param in value if param]
        if any(param.lstrip("-") == "cluster" for param in params):
            qs = qs.annotate(first_cluster=Min("lines__team_namespace__cluster__name"))
        order = []
        for param in params:
            field = F(self.param_map[param.lstrip("-")])
            descending = param.startswith("-")
            order.append(field.desc(nulls_last=True) if descending else field.asc(nulls_last=True))
        return qs.order_by(*order, "id")


ORDERING_CHOICES = [
    ("submitted", _("oldest submitted first")),
    ("-submitted", _("newest submitted first")),
    ("-created", _("newest created first")),
    ("created", _("oldest created first")),
    ("team", _("team")),
    ("-team", _("team, descending")),
    ("cluster", _("cluster")),
    ("-cluster", _("cluster, descending")),
    ("status", _("status")),
    ("-status", _("status, descending")),
]


class RequestFilterSet(PortalFilterSet):
    """?status=&team=&cluster=&kind=&created_after=&created_before=&submitted_before=
    &older_than=&waiting=&ordering=, all optional (a request's age: created_after and
    created_before, days; submitted_before, a day; older_than, days since it was submitted)."""

    status = django_filters.ChoiceFilter(
        choices=S.choices,
        empty_label=_("all statuses"),
        help_text=_("Request status."),
        error_messages=one_of(S.choices),
    )
    team = team_filter("team")
    team.extra["empty_label"] = _("all teams")
    cluster = cluster_filter("lines__team_namespace__cluster", method="filter_cluster")
    cluster.extra["empty_label"] = _("all clusters")
    kind = django_filters.ChoiceFilter(
        choices=QuotaRequest.Kind.choices,
        empty_label=_("all kinds"),
        help_text=_("Permanent change or temporary grant."),
        error_messages=one_of(QuotaRequest.Kind.choices),
    )
    created_after = django_filters.DateFilter(
        field_name="created_at",
        lookup_expr="date__gte",
        label=_("created from"),
        help_text=_("Created on or after this day (YYYY-MM-DD, the portal's time zone)."),
        error_messages={"invalid": _("give a day as YYYY-MM-DD")},
        widget=DAY,
    )
    created_before = django_filters.DateFilter(
        field_name="created_at",
        lookup_expr="date__lte",
        label=_("created to"),
        help_text=_("Created on or before this day (YYYY-MM-DD, the portal's time zone)."),
        error_messages={"invalid": _("give a day as YYYY-MM-DD")},
        widget=DAY,
    )
    submitted_before = django_filters.DateFilter(
        field_name="submitted_at",
        lookup_expr="date__lt",
        label=_("submitted before"),
        help_text=_(
            "Submitted before this day (YYYY-MM-DD, the portal's time zone); requests "
            "never submitted are left out."
        ),
        error_messages={"invalid": _("give a day as YYYY-MM-DD")},
        widget=DAY,
    )
    older_than = DaysFilter(
        method="filter_older_than",
        label=_("waiting more than (days)"),
        help_text=format_lazy(
            _(
                "Submitted more than this many whole days ago (0 to {max}); requests never "
                "submitted are left out."
            ),
            max=MAX_AGE_DAYS,
        ),
        min_value=0,
        max_value=MAX_AGE_DAYS,
        error_messages={
            "invalid": _("give a whole number of days"),
            "min_value": _("give 0 days or more"),
            "max_value": format_lazy(_("give at most {max} days"), max=MAX_AGE_DAYS),
        },
    )
    ordering = RequestOrderingFilter(
        fields={
            "submitted_at": "submitted",
            "created_at": "created",
            "team__slug": "team",
            "first_cluster": "cluster",
            "status": "status",
        },
        choices=ORDERING_CHOICES,
        empty_label=_("default order"),
        label=_("sort"),
        help_text=_(
            "Sort by submitted, created, team, cluster or status; a leading '-' sorts "
            "descending (e.g. -submitted); requests never submitted sort last."
        ),
        error_messages={
            "invalid_choice": format_lazy(
                _("{value} is not one of {choices}"),
                value="%(value)r",
                choices=", ".join(value for value, _label in ORDERING_CHOICES),
            )
        },
    )
    waiting = StrictBooleanFilter(
        method="filter_waiting",
        label=_("waiting for me"),
        help_text=_(
            "Only submitted requests this platform admin has yet to decide "
            "(not their own, not approved by them yet); ignored for everyone else."
        ),
    )

    class Meta:
        model = QuotaRequest
        fields = [
            "status",
            "team",
            "cluster",
            "kind",
            "created_after",
            "created_before",
            "submitted_before",
            "older_than",
            "waiting",
        ]

    def __init__(self, *args, teams: QuerySet[Team] | None = None, **kwargs):
        """``teams``: the teams ?team= chooses from, when the caller read the user's already
        (else the teams the request's user sees)."""
        super().__init__(*args, **kwargs)
        if teams is not None:
            self.filters["team"].queryset = teams.only(*TEAM_CHOICE_FIELDS)

    def counted_queryset(self, queryset, leave_out: tuple[str, ...]):
        """Of ``queryset``, the requests every filter but those left out selects (the page's
        status tabs count them), from this form as it was cleaned; None when a filter not
        left out has an error."""
        if not self.is_bound:
            return queryset
        if any(name not in leave_out for name in self.form.errors):
            return None
        cleaned = self.form.cleaned_data
        for name, value in cleaned.items():
            if name not in leave_out:
                queryset = self.filters[name].filter(queryset, value)
        return queryset

    def filter_cluster(self, queryset, name, value):
        """Requests with a line on the cluster, each once however many lines it has there
        (a test of each request, not a join: the list and its counts stay one row a
        request)."""
        if value is None:
            return queryset
        return queryset.filter(
            Exists(
                RequestLine.objects.filter(request=OuterRef("pk"), team_namespace__cluster=value)
            )
        )

    def filter_older_than(self, queryset, name, value):
        return queryset.filter(submitted_at__lt=timezone.now() - timedelta(days=value))

    def filter_waiting(self, queryset, name, value):
        user = self.request.user if self.request is not None else None
        if not value or user is None or not is_platform_admin(user):
            return queryset
        return restrict(queryset, user, "approve")
