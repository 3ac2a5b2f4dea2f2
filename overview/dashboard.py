"""Reads of requests and suggestions for the team dashboard: per team, the requests still on
their way, the latest finished ones, the temporary grants in force and the suggestions nobody
has turned into a request yet. Each is one query for any number of teams."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.db.models import (
    BooleanField,
    Count,
    Exists,
    ExpressionWrapper,
    F,
    OuterRef,
    Q,
    Subquery,
    Window,
)
from django.db.models.functions import Coalesce, RowNumber

from approvals.lifecycle import _SUGGESTION_REUSABLE
from approvals.models import QuotaRequest
from approvals.transitions import ALLOWED, S
from usage.models import Suggestion

# Still on its way: a status the lifecycle moves on from. A temporary grant in force (active)
# is listed on its own, with its end.
IN_FLIGHT = tuple(status for status, onward in ALLOWED.items() if onward and status != S.ACTIVE)
RECENT_PER_TEAM = 5


def team_requests(*, team_ids: Iterable[int], limit: int = RECENT_PER_TEAM) -> dict[int, dict]:
    """Per team: ``pending`` (in flight, newest first), ``recent`` (finished, latest change
    first), ``limit`` of each at most, and how many there are in all (``pending_count``,
    ``recent_count``). One query; each request a row (id, status, kind, updated_at,
    requested_by__username)."""
    in_flight = ExpressionWrapper(Q(status__in=IN_FLIGHT), output_field=BooleanField())
    partition = [F("team_id"), in_flight]
    ranked = (
        QuotaRequest.objects.filter(team_id__in=list(team_ids))
        .exclude(status=S.ACTIVE)
        .annotate(
            in_flight=in_flight,
            rank=Window(
                RowNumber(),
                partition_by=partition,
                order_by=[F("updated_at").desc(), F("id").desc()],
            ),
            total=Window(Count("id"), partition_by=partition),
        )
        .filter(rank__lte=limit)
        .order_by("team_id", "-updated_at", "-id")
        .values(
            "id",
            "team_id",
            "status",
            "kind",
            "updated_at",
            "requested_by__username",
            "in_flight",
            "total",
        )
    )
    out: dict[int, dict] = defaultdict(
        lambda: {"pending": [], "recent": [], "pending_count": 0, "recent_count": 0}
    )
    for request in ranked:
        which = "pending" if request["in_flight"] else "recent"
        out[request["team_id"]][which].append(request)
        out[request["team_id"]][f"{which}_count"] = request["total"]
    return out


def active_temporary_grants(*, team_ids: Iterable[int]) -> dict[int, list[dict]]:
    """Per team: its temporary grants in force, soonest end first (id, team_id, ends_at), each
    with its ``lines`` (namespace and resource names, the final guarantee and cap).
    One query: a row per line, a grant without lines a row of its own."""
    rows = (
        QuotaRequest.objects.filter(
            team_id__in=list(team_ids), kind=QuotaRequest.Kind.TEMPORARY, status=S.ACTIVE
        )
        # RequestLine.final_guarantee and final_cap: decided, else requested.
        .annotate(
            guarantee=Coalesce("lines__decided_guarantee", "lines__requested_guarantee"),
            cap=Coalesce("lines__decided_cap", "lines__requested_cap"),
        )
        .order_by("ends_at", "id", "lines__id")
        .values_list(
            "id",
            "team_id",
            "ends_at",
            "lines__id",
            "lines__team_namespace__name",
            "lines__resource__name",
            "guarantee",
            "cap",
        )
    )
    out: dict[int, list[dict]] = defaultdict(list)
    grant: dict = {}
    for grant_id, team_id, ends_at, line_id, namespace, resource, guarantee, cap in rows:
        if grant.get("id") != grant_id:
            grant = {"id": grant_id, "team_id": team_id, "ends_at": ends_at, "lines": []}
            out[team_id].append(grant)
        if line_id is not None:
            grant["lines"].append(
                {"namespace": namespace, "resource": resource, "guarantee": guarantee, "cap": cap}
            )
    return out


def open_suggestions(*, team_ids: Iterable[int]) -> dict[int, list[dict]]:
    """Per team: the newest suggestion of each namespace and resource that would change the
    allocation and that no request made from it has taken up (one being decided or applied);
    the same rule as the one that refuses a second request from a suggestion. One query; each
    suggestion a row (month, its amounts, confidence, team_namespace__team_id, cluster__name,
    team_namespace__name, resource__name)."""
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
        .order_by("team_namespace__team_id", "cluster__name", "team_namespace__name")
        .values(
            "month",
            "current_guarantee",
            "suggested_guarantee",
            "current_cap",
            "suggested_cap",
            "confidence",
            "team_namespace__team_id",
            "cluster__name",
            "team_namespace__name",
            "resource__name",
        )
    )
    out: dict[int, list[dict]] = defaultdict(list)
    for suggestion in rows:
        out[suggestion["team_namespace__team_id"]].append(suggestion)
    return out
