"""Reads of suggestions, scoped to what the asking user may see, and the one filter (cluster,
team, month) that the suggestions page and ``/api/v1/suggestions/`` share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date

from django.db.models import QuerySet

from portal.errors import ValidationFailed
from quotas.models import Cluster, Suggestion, Team
from quotas.roles import AnyUser, is_platform_admin
from quotas.selectors import teams_led_by, teams_visible_to
from quotas.usage.suggestions import parse_month


def suggestions_visible_to(user: AnyUser) -> QuerySet[Suggestion]:
    """Suggestions of the teams the user may see (leads and members their teams, a department's
    lead its teams, admins and auditors all)."""
    return Suggestion.objects.filter(
        team_namespace__team__in=teams_visible_to(user)
    ).select_related("cluster", "team_namespace__team", "resource")


def suggestion_requestable_by(user: AnyUser, suggestion: Suggestion) -> bool:
    """Whether the user may turn it into a request: leads of its team and platform admins (the
    rule request_create applies; the page asks it to show the button)."""
    if is_platform_admin(user):
        return True
    return teams_led_by(user).filter(pk=suggestion.team_namespace.team_id).exists()


@dataclass(frozen=True)
class SuggestionFilter:
    cluster: Cluster | None = None
    team: Team | None = None
    month: date | None = None

    def apply(self, suggestions: QuerySet[Suggestion]) -> QuerySet[Suggestion]:
        if self.cluster is not None:
            suggestions = suggestions.filter(cluster=self.cluster)
        if self.team is not None:
            suggestions = suggestions.filter(team_namespace__team=self.team)
        if self.month is not None:
            suggestions = suggestions.filter(month=self.month)
        return suggestions


def suggestion_filter_parse(user: AnyUser, params: Mapping[str, str]) -> SuggestionFilter:
    """?cluster=NAME&team=SLUG&month=YYYY-MM, each optional; a value that names nothing the
    user may see is refused naming the parameter."""
    cluster = team = month = None
    if value := (params.get("cluster") or "").strip():
        cluster = Cluster.objects.filter(name=value).first()
        if cluster is None:
            raise ValidationFailed(f"cluster: no cluster named {value!r}", field="cluster")
    if value := (params.get("team") or "").strip():
        team = teams_visible_to(user).filter(slug=value).first()
        if team is None:
            raise ValidationFailed(
                f"team: no team {value!r} among the teams you may see", field="team"
            )
    if value := (params.get("month") or "").strip():
        month = parse_month(value)
    return SuggestionFilter(cluster=cluster, team=team, month=month)


def suggestions_list(user: AnyUser, flt: SuggestionFilter) -> QuerySet[Suggestion]:
    return flt.apply(suggestions_visible_to(user)).order_by(
        "-month",
        "cluster__name",
        "team_namespace__team__slug",
        "team_namespace__name",
        "resource__name",
    )
