"""The filters of quota lists, one FilterSet per list, shared by the pages and the API.

Filters take names (cluster and resource names, team slugs), as the API's bodies do. Where a page
offers the choices (teams, clusters of the suggestion and request lists), a name that matches
nothing the user may see is an error naming the parameter; every filter refuses a malformed
value (a bad month, date or status) the same way.
"""

import django_filters
from django import forms
from django.core.validators import RegexValidator
from django.db.models import QuerySet
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy
from drf_spectacular.utils import extend_schema_field

from common.dates import day_or_none, month_or_none
from common.filtersets import (
    ModelChoiceFilter,
    MomentFilter,
    PortalFilterSet,
    StrictBooleanFilter,
    one_of,
    period_form,
)
from quotas.audit.chain import audit_events_of_team
from quotas.models import (
    Allocation,
    AuditEvent,
    Cluster,
    DriftEvent,
    Resource,
    RunTimeLimit,
    SyncRun,
    Team,
    TeamNamespace,
)
from quotas.selectors import teams_visible_to

# A choice's value and label are all a filter's select reads of a team or cluster (the other
# fields of the one chosen are read if ever asked for): a cluster's 28 columns, with their JSON
# and prices converted, cost the list pages twice the query itself.
TEAM_CHOICE_FIELDS = ("id", "slug")


def _teams(request) -> QuerySet[Team]:
    if request is None:
        return Team.objects.none()
    return teams_visible_to(request.user).only(*TEAM_CHOICE_FIELDS)


def cluster_filter(field_name: str, **extra) -> ModelChoiceFilter:
    return ModelChoiceFilter(
        field_name=field_name,
        **extra,
        queryset=Cluster.objects.only("id", "name"),
        to_field_name="name",
        help_text=gettext_lazy("Cluster name."),
        error_messages={"invalid_choice": gettext_lazy("no cluster named %(value)r")},
    )


def team_filter(field_name: str) -> ModelChoiceFilter:
    return ModelChoiceFilter(
        field_name=field_name,
        queryset=_teams,
        to_field_name="slug",
        help_text=gettext_lazy("Team slug (a team you may see)."),
        error_messages={
            "invalid_choice": gettext_lazy("no team %(value)r among the teams you may see")
        },
    )


def resource_filter(field_name: str) -> ModelChoiceFilter:
    return ModelChoiceFilter(
        field_name=field_name,
        queryset=Resource.objects.all(),
        to_field_name="name",
        help_text=gettext_lazy("Resource name, e.g. nvidia.com/gpu."),
        error_messages={"invalid_choice": gettext_lazy("no resource named %(value)r")},
    )


NAME = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,252}$",
    gettext_lazy("a name of letters, digits, '.', '_', '-' and '/' (at most 253), got %(value)r"),
    code="invalid",
)


def name_filter(field_name: str, help_text: str) -> django_filters.CharFilter:
    return django_filters.CharFilter(
        field_name=field_name, max_length=253, validators=[NAME], help_text=help_text
    )


class AllocationFilterSet(PortalFilterSet):
    """Current allocations: ?cluster=&team=&namespace=&resource=, all optional. These match
    names as given (a well-formed name that matches nothing is an empty list, as automation
    listing a cluster not yet set up expects); a malformed one is an error."""

    cluster = name_filter("team_namespace__cluster__name", "Cluster name.")
    team = name_filter("team_namespace__team__slug", "Team slug.")
    namespace = name_filter("team_namespace__name", "Namespace name.")
    resource = name_filter("resource__name", "Resource name, e.g. nvidia.com/gpu.")

    class Meta:
        model = Allocation
        fields = ["cluster", "team", "namespace", "resource"]


class TeamFilterSet(PortalFilterSet):
    """Teams: ?parent=&cluster= (teams with a namespace on the cluster)."""

    parent = ModelChoiceFilter(
        field_name="parent",
        queryset=_teams,
        to_field_name="slug",
        help_text="Slug of the parent team (a department).",
        error_messages={
            "invalid_choice": gettext_lazy("no team %(value)r among the teams you may see")
        },
    )
    cluster = ModelChoiceFilter(
        field_name="namespaces__cluster",
        distinct=True,
        queryset=Cluster.objects.only("id", "name"),
        to_field_name="name",
        help_text="Cluster name: teams with a namespace on it.",
        error_messages={"invalid_choice": gettext_lazy("no cluster named %(value)r")},
    )

    class Meta:
        model = Team
        fields = ["parent", "cluster"]


class _CalendarField(forms.CharField):
    """Text read by one of common.dates' parsers (impossible dates refused, naming the value)."""

    parse = staticmethod(lambda text: None)
    message = ""

    def to_python(self, value):
        text = super().to_python(value)
        if not text:
            return None
        parsed = self.parse(text)
        if parsed is None:
            raise forms.ValidationError(self.message, code="invalid", params={"value": text})
        return parsed


class MonthField(_CalendarField):
    """YYYY-MM as the first day of that month."""

    parse = staticmethod(month_or_none)
    message = gettext_lazy("give a month as YYYY-MM, got %(value)r")


class DayField(_CalendarField):
    """YYYY-MM-DD, and only that; Django's DateField would also take other formats, and name
    no value in its message."""

    parse = staticmethod(day_or_none)
    message = gettext_lazy("give a day as YYYY-MM-DD, got %(value)r")


@extend_schema_field({"type": "string", "format": "date", "example": "2026-01-31"})
class DayFilter(django_filters.Filter):
    field_class = DayField


@extend_schema_field(
    {
        "type": "string",
        "pattern": r"^[0-9]{4}-[0-9]{2}$",
        "example": "2025-06",
        "description": "A month, as YYYY-MM.",
    }
)
class MonthFilter(django_filters.Filter):
    field_class = MonthField


class NamespaceFilterSet(PortalFilterSet):
    """Team namespaces: ?cluster=&team=, both optional; an unknown cluster, or a team the user
    may not see, is an error naming the parameter."""

    cluster = cluster_filter("cluster")
    team = team_filter("team")

    class Meta:
        model = TeamNamespace
        fields = ["cluster", "team"]


class RunTimeLimitFilterSet(PortalFilterSet):
    """Maximum run times: ?cluster=&team=, both optional, as for namespaces."""

    cluster = cluster_filter("team_namespace__cluster")
    team = team_filter("team_namespace__team")

    class Meta:
        model = RunTimeLimit
        fields = ["cluster", "team"]


class SyncRunFilterSet(PortalFilterSet):
    """Sync runs: ?cluster=&status=&trigger=, all optional."""

    cluster = cluster_filter("cluster")
    status = django_filters.ChoiceFilter(
        choices=SyncRun.Status.choices,
        help_text="How the run ended (running while it goes on).",
        error_messages=one_of(SyncRun.Status.choices),
    )
    trigger = django_filters.ChoiceFilter(
        choices=SyncRun.Trigger.choices,
        help_text="What started the run.",
        error_messages=one_of(SyncRun.Trigger.choices),
    )

    class Meta:
        model = SyncRun
        fields = ["cluster", "status", "trigger"]


class DriftFilterSet(PortalFilterSet):
    """Drift found on cluster objects: ?cluster=&restored=, both optional."""

    cluster = cluster_filter("cluster")
    restored = StrictBooleanFilter(
        field_name="restored", help_text="true: only drift the portal put back; false: the rest."
    )

    class Meta:
        model = DriftEvent
        fields = ["cluster", "restored"]


def audit_text_filter(regex: str, what: str, **kwargs) -> django_filters.CharFilter:
    """A text filter of the audit log that refuses what its column never holds (spaces,
    quotes, brackets), naming what it takes; a well-formed value that matches nothing is an
    empty list."""
    return django_filters.CharFilter(
        validators=[
            RegexValidator(
                regex,
                format_lazy(gettext_lazy("{what}, got %(value)r"), what=what),
                code="invalid",
            )
        ],
        **kwargs,
    )


@extend_schema_field({"type": "string", "example": "team-a"})
class TeamSlugFilter(ModelChoiceFilter):
    """A team by slug, read by a method (the schema cannot guess its type from a field)."""


class AuditEventFilterSet(PortalFilterSet):
    """The audit log: ?actor=&team=&action=&target_type=&target_id=&since=&until=, all
    optional (the page /audit/, its CSV export and the API alike)."""

    actor = audit_text_filter(
        r"^[\w.@+-]{1,150}\Z",
        gettext_lazy("a user name (letters, digits, '@', '.', '+', '-', '_'; at most 150)"),
        field_name="actor_username",
        help_text="User name.",
    )
    team = TeamSlugFilter(
        queryset=_teams,
        to_field_name="slug",
        method="filter_team",
        help_text="Team slug: events about the team, its namespaces, allocations and requests.",
        error_messages={
            "invalid_choice": gettext_lazy("no team %(value)r among the teams you may see")
        },
    )
    action = audit_text_filter(
        r"^[A-Za-z0-9_.-]{1,100}\Z",
        gettext_lazy("an action of letters, digits, '_', '-' and '.' (at most 100)"),
        method="filter_action",
        help_text="An action (request.approval), or a prefix ending in a dot (request.).",
    )
    target_type = audit_text_filter(
        r"^[A-Za-z_][A-Za-z0-9_]{0,99}\Z",
        gettext_lazy("a kind of object such as QuotaRequest"),
        help_text="Kind of object acted on, e.g. QuotaRequest.",
    )
    target_id = audit_text_filter(
        r"^[\w.:@/-]{1,100}\Z",
        gettext_lazy("an id of letters, digits, '_', '.', ':', '@', '/' and '-' (at most 100)"),
        help_text="Id of the object acted on.",
    )
    since = MomentFilter(
        field_name="created_at",
        lookup_expr="gte",
        help_text="At or after this time (ISO 8601), or from the start of this day.",
    )
    until = MomentFilter(
        field_name="created_at",
        lookup_expr="lte",
        end_of_day=True,
        help_text="At or before this time (ISO 8601), or to the end of this day.",
    )

    class Meta:
        model = AuditEvent
        fields = ["actor", "team", "action", "target_type", "target_id", "since", "until"]
        form = period_form("since", "until")

    def filter_team(self, queryset, name, value):
        return audit_events_of_team(queryset, value.pk)

    def filter_action(self, queryset, name, value):
        if value.endswith("."):
            return queryset.filter(action__startswith=value)
        return queryset.filter(action=value)
