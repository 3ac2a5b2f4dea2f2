"""Reads of requests and suggestions for the team dashboard: per team, the requests still on
their way, the latest finished ones, the temporary grants in force and the suggestions nobody
has turned into a request yet. Each is one query for any number of teams."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.db.models import Case, Count, Exists, F, OuterRef, Prefetch, Q, Subquery, When, Window
from django.db.models.functions import RowNumber

from approvals.lifecycle import _SUGGESTION_REUSABLE
from approvals.models import QuotaRequest, RequestLine
from approvals.transitions import ALLOWED, S
from quotas.models import Suggestion

# Still on its way: a status the lifecycle moves on from. A temporary grant in force (active)
# is listed on its own, with its end.
IN_FLIGHT = tuple(status for status, onward in ALLOWED.items() if onward and status != S.ACTIVE)
RECENT_PER_TEAM = 5


def team_requests(*, team_ids: Iterable[int], limit: int = RECENT_PER_TEAM) -> dict[int, dict]:
    """Per team: ``pending`` (in flight, newest first), ``recent`` (finished, latest change
    first), ``limit`` of each at most, and how many there are in all (``pending_count``,
    ``recent_count``). Two queries."""
    ids = list(team_ids)
    in_flight = Case(When(status__in=IN_FLIGHT, then=True), default=False)
    ranked = (
        QuotaRequest.objects.filter(team_id__in=ids)
        .exclude(status=S.ACTIVE)
        .select_related("requested_by")
        .annotate(
            in_flight=in_flight,
            rank=Window(
                RowNumber(),
                partition_by=[F("team_id"), in_flight],
                order_by=[F("updated_at").desc(), F("id").desc()],
            ),
        )
        .filter(rank__lte=limit)
        .order_by("team_id", "-updated_at", "-id")
    )
    out: dict[int, dict] = defaultdict(
        lambda: {"pending": [], "recent": [], "pending_count": 0, "recent_count": 0}
    )
    for request in ranked:
        out[request.team_id]["pending" if request.in_flight else "recent"].append(request)
    counts = (
        QuotaRequest.objects.filter(team_id__in=ids)
        .exclude(status=S.ACTIVE)
        .values("team_id")
        .annotate(
            pending=Count("id", filter=Q(status__in=IN_FLIGHT)),
            recent=Count("id", filter=~Q(status__in=IN_FLIGHT)),
        )
        .order_by()
    )
    for row in counts:
        out[row["team_id"]]["pending_count"] = row["pending"]
        out[row["team_id"]]["recent_count"] = row["recent"]
    return out


def active_temporary_grants(*, team_ids: Iterable[int]) -> dict[int, list[QuotaRequest]]:
    """Per team: its temporary grants in force, soonest end first, with their lines. Two
    queries."""
    lines = RequestLine.objects.select_related("team_namespace__cluster", "resource")
    grants = (
        QuotaRequest.objects.filter(
            team_id__in=list(team_ids), kind=QuotaRequest.Kind.TEMPORARY, status=S.ACTIVE
        )
        .prefetch_related(Prefetch("lines", queryset=lines))
        .order_by("ends_at", "id")
    )
    out: dict[int, list[QuotaRequest]] = defaultdict(list)
    for grant in grants:
        out[grant.team_id].append(grant)
    return out


def open_suggestions(*, team_ids: Iterable[int]) -> dict[int, list[Suggestion]]:
    """Per team: the newest suggestion of each namespace and resource that would change the
    allocation and that no request made from it has taken up (one being decided or applied);
    the same rule as the one that refuses a second request from a suggestion. One query."""
    newest_month = (
        Suggestion.objects.filter(
            team_namespace=OuterRef("team_namespace"), resource=OuterRef("resource")
        )
        .order_by("-month")
        .values("month")[:1]
    )
    taken = QuotaRequest.objects.filter(suggestion=OuterRef("pk")).exclude(
        status__in=_SUGGESTION_REUSABLE
    )
    rows = (
        Suggestion.objects.filter(team_namespace__team_id__in=list(team_ids))
        .filter(month=Subquery(newest_month))
        .exclude(suggested_guarantee=F("current_guarantee"), suggested_cap=F("current_cap"))
        .exclude(Exists(taken))
        .select_related("cluster", "team_namespace", "resource")
        .order_by("team_namespace__team_id", "cluster__name", "team_namespace__name")
    )
    out: dict[int, list[Suggestion]] = defaultdict(list)
    for suggestion in rows:
        out[suggestion.team_namespace.team_id].append(suggestion)
    return out
