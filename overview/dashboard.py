"""Reads of requests and suggestions for the team dashboard: per team, the requests still on
their way, the latest finished ones, the temporary grants in force, the suggestions nobody
has turned into a request yet and the namespaces' maximum run times. Each is one query for
any number of teams, written in SQL (the same on PostgreSQL and SQLite): the ORM took longer
to build these queries (windows, correlated subqueries) than the database to answer them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.db import connection

from approvals.lifecycle import _SUGGESTION_REUSABLE
from approvals.models import QuotaRequest, RequestLine
from approvals.transitions import ALLOWED, S
from common.sql import db_date, db_decimal, db_moment, in_list, tables
from quotas.models import Cluster, PriorityClass, Resource, RunTimeLimit, TeamNamespace
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
    ids = list(team_ids)
    if not ids:
        return {}
    names = tables(request=QuotaRequest, user=QuotaRequest.requested_by.field.related_model)
    sql = f"""
        SELECT id, team_id, status, kind, updated_at, username, in_flight, total
        FROM (
            SELECT b.*,
                ROW_NUMBER() OVER (PARTITION BY team_id, in_flight
                                   ORDER BY updated_at DESC, id DESC) AS position,
                COUNT(*) OVER (PARTITION BY team_id, in_flight) AS total
            FROM (
                SELECT q.id, q.team_id, q.status, q.kind, q.updated_at, u.username,
                    CASE WHEN q.status {in_list(IN_FLIGHT)} THEN 1 ELSE 0 END AS in_flight
                FROM {names["request"]} q
                JOIN {names["user"]} u ON u.id = q.requested_by_id
                WHERE q.team_id {in_list(ids)} AND q.status <> %s
            ) b
        ) ranked
        WHERE position <= %s
        ORDER BY team_id, updated_at DESC, id DESC
    """  # noqa: S608 - the models' table names and placeholders: no value is written in
    with connection.cursor() as cursor:
        cursor.execute(sql, [*IN_FLIGHT, *ids, S.ACTIVE, limit])
        found = cursor.fetchall()
    out: dict[int, dict] = defaultdict(
        lambda: {"pending": [], "recent": [], "pending_count": 0, "recent_count": 0}
    )
    for pk, team_id, status, kind, updated_at, username, in_flight, total in found:
        which = "pending" if in_flight else "recent"
        out[team_id][which].append(
            {
                "id": pk,
                "team_id": team_id,
                "status": status,
                "kind": kind,
                "updated_at": db_moment(updated_at),
                "requested_by__username": username,
            }
        )
        out[team_id][f"{which}_count"] = total
    return out


def active_temporary_grants(*, team_ids: Iterable[int]) -> dict[int, list[dict]]:
    """Per team: its temporary grants in force, soonest end first (id, team_id, ends_at), each
    with its ``lines`` (namespace and resource names, the final guarantee and cap: decided,
    else requested, as RequestLine's final_guarantee and final_cap). One query: a row per
    line, a grant without lines a row of its own."""
    ids = list(team_ids)
    if not ids:
        return {}
    names = tables(
        request=QuotaRequest, line=RequestLine, namespace=TeamNamespace, resource=Resource
    )
    sql = f"""
        SELECT q.id, q.team_id, q.ends_at, l.id, tn.name, r.name,
            COALESCE(l.decided_guarantee, l.requested_guarantee),
            COALESCE(l.decided_cap, l.requested_cap)
        FROM {names["request"]} q
        LEFT JOIN {names["line"]} l ON l.request_id = q.id
        LEFT JOIN {names["namespace"]} tn ON tn.id = l.team_namespace_id
        LEFT JOIN {names["resource"]} r ON r.id = l.resource_id
        WHERE q.team_id {in_list(ids)} AND q.kind = %s AND q.status = %s
        ORDER BY q.ends_at, q.id, l.id
    """  # noqa: S608 - the models' table names and placeholders: no value is written in
    with connection.cursor() as cursor:
        cursor.execute(sql, [*ids, QuotaRequest.Kind.TEMPORARY, S.ACTIVE])
        rows = cursor.fetchall()
    out: dict[int, list[dict]] = defaultdict(list)
    grant: dict = {}
    for grant_id, team_id, ends_at, line_id, namespace, resource, guarantee, cap in rows:
        if grant.get("id") != grant_id:
            grant = {"id": grant_id, "team_id": team_id, "ends_at": db_moment(ends_at)}
            grant["lines"] = []
            out[team_id].append(grant)
        if line_id is not None:
            grant["lines"].append(
                {
                    "namespace": namespace,
                    "resource": resource,
                    "guarantee": db_decimal(guarantee),
                    "cap": db_decimal(cap),
                }
            )
    return out


def open_suggestions(*, team_ids: Iterable[int]) -> dict[int, list[dict]]:
    """Per team: the newest suggestion of each namespace and resource that would change the
    allocation and that no request made from it has taken up (one being decided or applied);
    the same rule as the one that refuses a second request from a suggestion. One query; each
    suggestion a row (month, its amounts, confidence, team_namespace__team_id, cluster__name,
    team_namespace__name, resource__name)."""
    ids = list(team_ids)
    if not ids:
        return {}
    names = tables(
        suggestion=Suggestion,
        request=QuotaRequest,
        namespace=TeamNamespace,
        cluster=Cluster,
        resource=Resource,
    )
    sql = f"""
        SELECT g.month, g.current_guarantee, g.suggested_guarantee, g.current_cap,
            g.suggested_cap, g.confidence, tn.team_id, c.name, tn.name, r.name
        FROM {names["suggestion"]} g
        JOIN {names["namespace"]} tn ON tn.id = g.team_namespace_id
        JOIN {names["cluster"]} c ON c.id = g.cluster_id
        JOIN {names["resource"]} r ON r.id = g.resource_id
        WHERE tn.team_id {in_list(ids)}
            AND g.month = (
                SELECT n.month FROM {names["suggestion"]} n
                WHERE n.team_namespace_id = g.team_namespace_id AND n.resource_id = g.resource_id
                ORDER BY n.month DESC LIMIT 1)
            AND NOT (g.suggested_guarantee = g.current_guarantee
                     AND g.suggested_cap = g.current_cap)
            AND NOT EXISTS (
                SELECT 1 FROM {names["request"]} q
                WHERE q.suggestion_id = g.id AND q.status NOT {in_list(_SUGGESTION_REUSABLE)})
        ORDER BY tn.team_id, c.name, tn.name
    """  # noqa: S608 - the models' table names and placeholders: no value is written in
    with connection.cursor() as cursor:
        cursor.execute(sql, [*ids, *_SUGGESTION_REUSABLE])
        rows = cursor.fetchall()
    out: dict[int, list[dict]] = defaultdict(list)
    for month, current_g, suggested_g, current_c, suggested_c, confidence, team_id, *where in rows:
        cluster, namespace, resource = where
        out[team_id].append(
            {
                "month": db_date(month),
                "current_guarantee": db_decimal(current_g),
                "suggested_guarantee": db_decimal(suggested_g),
                "current_cap": db_decimal(current_c),
                "suggested_cap": db_decimal(suggested_c),
                "confidence": confidence,
                "team_namespace__team_id": team_id,
                "cluster__name": cluster,
                "team_namespace__name": namespace,
                "resource__name": resource,
            }
        )
    return out


def run_time_limits(*, team_ids: Iterable[int]) -> dict[int, list[dict]]:
    """Per team: the maximum run times of its namespaces (cluster, namespace, priority_class,
    seconds), by cluster, namespace and priority class. One query."""
    ids = list(team_ids)
    if not ids:
        return {}
    names = tables(
        limit=RunTimeLimit, namespace=TeamNamespace, cluster=Cluster, priority=PriorityClass
    )
    sql = f"""
        SELECT tn.team_id, c.name, tn.name, p.name, l.max_seconds
        FROM {names["limit"]} l
        JOIN {names["namespace"]} tn ON tn.id = l.team_namespace_id
        JOIN {names["cluster"]} c ON c.id = tn.cluster_id
        JOIN {names["priority"]} p ON p.id = l.priority_class_id
        WHERE tn.team_id {in_list(ids)}
        ORDER BY c.name, tn.name, p.name
    """  # noqa: S608 - the models' table names and placeholders: no value is written in
    with connection.cursor() as cursor:
        cursor.execute(sql, ids)
        rows = cursor.fetchall()
    out: dict[int, list[dict]] = defaultdict(list)
    for team_id, cluster, namespace, priority_class, seconds in rows:
        out[team_id].append(
            {
                "cluster": cluster,
                "namespace": namespace,
                "priority_class": priority_class,
                "seconds": seconds,
            }
        )
    return out
