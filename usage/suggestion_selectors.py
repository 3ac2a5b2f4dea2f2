"""Reads of suggestions, scoped to what the asking user may see (the suggestions page and
``/api/v1/suggestions/`` filter them with usage.filtersets.SuggestionFilterSet)."""

from __future__ import annotations

from django.db.models import QuerySet

from quotas.roles import AnyUser
from quotas.selectors import teams_requestable_by, teams_visible_to
from usage.models import Suggestion


def suggestions_visible_to(user: AnyUser) -> QuerySet[Suggestion]:
    """Suggestions of the teams the user may see (leads and members their teams, a department's
    lead its teams, admins and auditors all)."""
    return Suggestion.objects.filter(
        team_namespace__team__in=teams_visible_to(user)
    ).select_related("cluster", "team_namespace__team", "resource")


def suggestion_requestable_by(user: AnyUser, suggestion: Suggestion) -> bool:
    """Whether the user may turn it into a request: leads of its team and platform admins (the
    rule request_create applies; the page asks it to show the button)."""
    return teams_requestable_by(user).filter(pk=suggestion.team_namespace.team_id).exists()


def suggestions_list(user: AnyUser) -> QuerySet[Suggestion]:
    """Every suggestion the user may see, newest month first (quotas.filtersets filters it)."""
    return suggestions_visible_to(user).order_by(
        "-month",
        "cluster__name",
        "team_namespace__team__slug",
        "team_namespace__name",
        "resource__name",
    )
