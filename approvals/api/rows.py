"""The API's request list written from rows: a page of requests, their lines and approvals
read as values (three queries at any page size, plus the plan check of the page's requests
waiting for an admin), each request answered as ``RequestSerializer`` answers it alone.

A page of 500 requests built as model instances and DRF fields cost about ten times the rows
it reads; the single reads (``GET requests/<id>/`` and the answers of the actions) keep the
serializer, and a test holds every list row equal to the request read alone.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any

import orjson
from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from approvals.models import Approval, QuotaRequest, RequestLine
from approvals.validation import findings_json, localized_findings, requests_fit_problems
from common.amounts import format_amount
from quotas.texts import stored_message

S = QuotaRequest.Status

# What a list row reads of a request, a line and an approval (their other columns, and users'
# passwords or clusters' connection settings, are not read).
# A request's moments, in the order the API answers them.
MOMENTS = ("starts_at", "ends_at", "created_at", "updated_at", "submitted_at", "decided_at")
REQUEST_COLUMNS = (
    "id",
    "team__slug",
    "status",
    "kind",
    "extends_id",
    "justification",
    "requested_by__username",
    *MOMENTS,
    "decided_by__username",
    "decision_comment",
    "auto_approved",
    "approvals_needed",
    "policy_reason",
)
# JSON columns read as their text and parsed with orjson: Django's JSONField parses each value
# with the json module, which was a third of a 500-row page.
REQUEST_JSON = ("policy_reason_text", "findings")
VALUE_PREFIXES = ("current", "requested", "decided")
LINE_COLUMNS = (
    "id",
    "request_id",
    "team_namespace__name",
    "team_namespace__cluster__name",
    "resource__name",
    "current_version",
    "applied_version",
    *(
        f"{prefix}_{name}"
        for prefix in VALUE_PREFIXES
        for name in ("guarantee", "cap", "per_pod_max")
    ),
)
LINE_JSON = tuple(f"{prefix}_priority_classes" for prefix in VALUE_PREFIXES)
APPROVAL_COLUMNS = ("request_id", "admin__username", "created_at", "comment")


def _json_values(queryset: QuerySet, columns: tuple[str, ...], json_columns: tuple[str, ...]):
    """``queryset.values(*columns)`` with ``json_columns`` too, each parsed from its text."""
    as_text = {f"{name}__text": Cast(name, output_field=TextField()) for name in json_columns}
    for row in queryset.values(*columns, **as_text):
        for name in json_columns:
            text = row.pop(f"{name}__text")
            row[name] = None if text is None else orjson.loads(text)
        yield row


def moments() -> Callable[[datetime | None], str | None]:
    """A writer of moments as the API's DateTimeField writes them (ISO 8601 in the current
    time zone, UTC as "Z"), for moments read from the database (always aware)."""
    zone = timezone.get_current_timezone()

    def moment(value: datetime | None) -> str | None:
        if value is None:
            return None
        text = value.astimezone(zone).isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text

    return moment


def line_values(get: Callable[[str], Any], prefix: str) -> dict:
    """A line's ``current``, ``requested`` or ``decided`` values as the API shows them; ``get``
    reads a column (of a model instance or of a row)."""
    return {
        "guarantee": format_amount(get(f"{prefix}_guarantee")),
        "cap": format_amount(get(f"{prefix}_cap")),
        "per_pod_max": format_amount(get(f"{prefix}_per_pod_max")),
        "priority_classes": get(f"{prefix}_priority_classes"),
    }


def _line(row: dict) -> dict:
    get = row.get
    return {
        "id": row["id"],
        "namespace": row["team_namespace__name"],
        "cluster": row["team_namespace__cluster__name"],
        "resource": row["resource__name"],
        "current": {**line_values(get, "current"), "version": row["current_version"]},
        "requested": line_values(get, "requested"),
        "decided": None if row["decided_cap"] is None else line_values(get, "decided"),
        "applied_version": row["applied_version"],
    }


def request_rows(requests: QuerySet[QuotaRequest]) -> Iterator[dict]:
    """What a list row reads of each request of ``requests`` (a page: sliced, ordered)."""
    return _json_values(requests, REQUEST_COLUMNS, REQUEST_JSON)


def request_list_bodies(rows: list[dict]) -> list[dict]:
    """The API answer of each request of ``rows`` (a page of :func:`request_rows`)."""
    moment = moments()
    ids = [row["id"] for row in rows]
    lines: dict[int, list[dict]] = defaultdict(list)
    page_lines = RequestLine.objects.filter(request_id__any_of=ids).order_by("id")
    for row in _json_values(page_lines, LINE_COLUMNS, LINE_JSON):
        lines[row["request_id"]].append(_line(row))
    approvals: dict[int, list[dict]] = defaultdict(list)
    for row in (
        Approval.objects.filter(request_id__any_of=ids)
        .order_by("request_id", "created_at", "id")
        .values(*APPROVAL_COLUMNS)
    ):
        approvals[row["request_id"]].append(
            {
                "admin": row["admin__username"],
                "created_at": moment(row["created_at"]),
                "comment": row["comment"],
            }
        )
    waiting = [row["id"] for row in rows if row["status"] == S.SUBMITTED]
    problems = fit_problems(waiting)
    bodies = []
    for row in rows:
        pk = row["id"]
        found = problems.get(pk)
        bodies.append(
            {
                "id": pk,
                "team": row["team__slug"],
                "status": row["status"],
                "kind": row["kind"],
                "extends": row["extends_id"],
                "justification": row["justification"],
                "requested_by": row["requested_by__username"],
                **{name: moment(row[name]) for name in MOMENTS},
                "decided_by": row["decided_by__username"],
                "decision_comment": row["decision_comment"],
                "auto_approved": row["auto_approved"],
                "approvals_needed": row["approvals_needed"],
                "policy_reason": stored_message(
                    {"message": row["policy_reason"], "text": row["policy_reason_text"]}
                ),
                "approvals": approvals.get(pk, []),
                "findings": localized_findings(row["findings"] or []),
                "fits_plan": None
                if found is None
                else {"fits": not found, "problems": findings_json(found)},
                "lines": lines.get(pk, []),
            }
        )
    return bodies


def fit_problems(request_ids: Iterable[int]) -> dict:
    """requests_fit_problems for requests known by id only (it reads their lines itself)."""
    return requests_fit_problems([QuotaRequest(pk=pk) for pk in request_ids])
