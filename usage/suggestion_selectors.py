"""Reads of suggestions and of their backtest, scoped to what the asking user may see (the
suggestions page and ``/api/v1/suggestions/`` filter them with usage.filtersets'
SuggestionFilterSet and SuggestionBacktestFilterSet)."""

from __future__ import annotations

from django.db.models import Case, F, IntegerField, QuerySet, Value, When, Window
from django.db.models.functions import DenseRank

from quotas.models import Cluster, TeamNamespace
from quotas.roles import AnyUser, sees_everything
from quotas.selectors import teams_requestable_by, teams_visible_to
from usage.models import Suggestion, SuggestionBacktest


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


# --- the backtest -------------------------------------------------------------------------------


def backtest_clusters_visible_to(user: AnyUser) -> QuerySet[Cluster]:
    """Clusters whose backtest the user may see: those whose suggestions they see, the clusters
    where a team they may see has a namespace (admins and auditors: every cluster). The
    backtest is of the whole cluster: a lead reads the other teams in it only as its totals."""
    if user.is_authenticated and user.is_active and sees_everything(user):
        return Cluster.objects.all()
    return Cluster.objects.filter(
        pk__in=TeamNamespace.objects.filter(team__in=teams_visible_to(user)).values("cluster_id")
    )


_POLICY_ORDER = Case(
    *(When(policy=p, then=Value(i)) for i, p in enumerate(SuggestionBacktest.Policy.values)),
    output_field=IntegerField(),
)


def backtests_visible_to(user: AnyUser) -> QuerySet[SuggestionBacktest]:
    return SuggestionBacktest.objects.filter(
        cluster__in=backtest_clusters_visible_to(user)
    ).select_related("cluster", "resource")


def backtests_list(user: AnyUser) -> QuerySet[SuggestionBacktest]:
    """Every backtest row the user may see, newest month first, the policies in the order of
    SuggestionBacktest.Policy (usage.filtersets.SuggestionBacktestFilterSet filters it)."""
    return backtests_visible_to(user).order_by(
        "-month", "cluster__name", "resource__name", _POLICY_ORDER
    )


def backtests_recent(
    user: AnyUser, *, cluster: Cluster | None = None, months: int = 6
) -> list[SuggestionBacktest]:
    """The rows of the last ``months`` months backtested of each cluster and resource the user
    may see (or of ``cluster``), in one query: by cluster, resource, newest month, policy."""
    rows = backtests_visible_to(user)
    if cluster is not None:
        rows = rows.filter(cluster=cluster)
    rows = rows.annotate(
        recent=Window(
            DenseRank(),
            partition_by=[F("cluster_id"), F("resource_id")],
            order_by=F("month").desc(),
        )
    ).filter(recent__lte=months)
    return list(rows.order_by("cluster__name", "resource__name", "-month", _POLICY_ORDER))
