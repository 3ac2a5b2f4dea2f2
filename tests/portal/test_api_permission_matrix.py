"""Every API endpoint × method × role, with the status each role gets.

The endpoints are read from the URL conf: an endpoint or method without a row in EXPECTED
fails ``test_every_endpoint_has_a_row``, so a new one cannot be left out. Each call runs in a
savepoint rolled back afterwards, so every role meets the same state (a submitted request of
team-a, a draft of team-a, their allocations, a sync run, a suggestion).
"""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from rest_framework.test import APIClient

from approvals.lifecycle import request_create
from approvals.lines import LineInput
from portal.tokens import api_token_create, api_token_revoke
from quotas.models import DriftEvent, PriorityClass, RunTimeLimit, SyncRun
from tests.support.api import API, view_methods
from tests.support.usage import june_suggestions_create, june_usage_create

pytestmark = pytest.mark.django_db

ROLES = ["member", "lead", "other_lead", "admin", "auditor"]
UNAUTHENTICATED = ["anonymous", "expired", "revoked"]


def row(member, lead, other_lead, admin, auditor) -> dict[str, int]:
    return dict(zip(ROLES, (member, lead, other_lead, admin, auditor), strict=True))


EVERYONE = row(200, 200, 200, 200, 200)
# The root, the schema and its docs page: open without a token too (a bad token is still a 401).
PUBLIC = {**EVERYONE, "anonymous": 200}
OVERVIEW = row(403, 403, 403, 200, 200)  # admins and auditors only
# Objects of team-a: hidden (404) from people of other teams.
TEAM_A = row(200, 200, 404, 200, 200)

EXPECTED: dict[tuple[str, str], dict[str, int]] = {
    ("api-root", "GET"): PUBLIC,
    ("api-schema", "GET"): PUBLIC,
    ("api-docs", "GET"): PUBLIC,
    ("api-teams", "GET"): EVERYONE,
    ("api-team", "GET"): TEAM_A,
    ("api-namespaces", "GET"): EVERYONE,
    ("api-allocations", "GET"): EVERYONE,
    ("api-allocation", "GET"): TEAM_A,
    ("api-allocation-versions", "GET"): TEAM_A,
    # What waits in team-a's namespace (read from its cluster): team-a, admins and auditors.
    ("api-namespace-waiting", "GET"): TEAM_A,
    ("api-run-time-limits", "GET"): EVERYONE,
    # Setting and removing maximum run times: platform admins only.
    ("api-run-time-limits", "PUT"): row(403, 403, 403, 201, 403),
    ("api-run-time-limit", "DELETE"): row(403, 403, 403, 204, 403),
    ("api-clusters", "GET"): OVERVIEW,
    ("api-cluster", "GET"): OVERVIEW,
    ("api-plan-violations", "GET"): OVERVIEW,
    ("api-sync-runs", "GET"): OVERVIEW,
    ("api-sync-run", "GET"): OVERVIEW,
    ("api-drift", "GET"): OVERVIEW,
    ("api-audit-events", "GET"): OVERVIEW,
    ("api-suggestions", "GET"): EVERYONE,
    ("api-suggestion", "GET"): TEAM_A,
    # How the suggestions did: every signed-in user, each the clusters of their teams.
    ("api-suggestion-backtests", "GET"): EVERYONE,
    ("api-usage-canary", "GET"): EVERYONE,
    ("api-usage-daily", "GET"): EVERYONE,
    ("api-budgets", "GET"): EVERYONE,
    ("api-showback", "GET"): EVERYONE,
    ("api-requests", "GET"): EVERYONE,
    # Create: leads of the team and admins; a team one cannot see is an unknown team (400).
    ("api-requests", "POST"): row(403, 201, 400, 201, 403),
    ("api-requests-preview", "POST"): row(403, 200, 400, 200, 403),
    ("api-request", "GET"): TEAM_A,
    # Revise the draft: its requester, leads of the team, admins.
    ("api-request", "PATCH"): row(403, 200, 404, 200, 403),
    # Delete the draft: its requester only.
    ("api-request", "DELETE"): row(403, 204, 404, 403, 403),
    ("api-request-preview", "POST"): TEAM_A,
    ("api-request-submit", "POST"): row(403, 200, 404, 200, 403),
    # Withdraw: the requester only.
    ("api-request-withdraw", "POST"): row(403, 200, 404, 403, 403),
    ("api-request-approve", "POST"): row(403, 403, 404, 200, 403),
    ("api-request-reject", "POST"): row(403, 403, 404, 200, 403),
    ("api-request-changes", "POST"): row(403, 403, 404, 200, 403),
    ("api-request-rebase", "POST"): row(403, 200, 404, 200, 403),
    # Revoke is for approved grants not yet started: this submitted request is refused (409).
    ("api-request-revoke", "POST"): row(403, 403, 404, 409, 403),
    ("api-suggestion-request", "POST"): row(403, 201, 404, 201, 403),
    # The discussion: read like the request; leads of the team and admins post, auditors read.
    ("api-request-comments", "GET"): TEAM_A,
    ("api-request-comments", "POST"): row(403, 201, 404, 201, 403),
    # Extending is for running temporary grants: this submitted request is refused (409).
    ("api-request-extend", "POST"): row(403, 409, 404, 409, 403),
}

REQUEST_BODY = {
    "team": "team-a",
    "justification": "fewer GPUs, inside the 50% rule",
    "lines": [
        {
            "namespace": "team-a-training",
            "cluster": "demo",
            "resource": "nvidia.com/gpu",
            "guarantee": "5",
            "cap": "8",
        }
    ],
}
BODIES = {
    "api-requests": REQUEST_BODY,
    "api-requests-preview": REQUEST_BODY,
    "api-request": {"lines": REQUEST_BODY["lines"]},
    "api-request-reject": {"comment": "no"},
    "api-request-changes": {"comment": "smaller"},
    "api-request-revoke": {"comment": "not needed"},
    "api-request-comments": {"text": "why eight?"},
    "api-run-time-limits": {
        "cluster": "demo",
        "namespace": "team-a-training",
        "priority_class": "experiment",
        "max_seconds": 3600,
    },
    "api-request-extend": {
        "ends_at": (timezone.now() + timedelta(days=2)).isoformat(),
        "justification": "longer",
    },
}
QUERIES = {
    "api-usage-canary": {"cluster": "demo", "start": "2025-06-01", "end": "2025-06-30"},
    "api-usage-daily": {"start": "2025-06-01", "end": "2025-06-30"},
}
# Which request a route acts on: drafts for what only drafts allow.
ON_DRAFT = {("api-request", "PATCH"), ("api-request", "DELETE"), ("api-request-submit", "POST")}


def _endpoints() -> list[tuple[str, str, str]]:
    """(route, name, method) of every API endpoint in the URL conf."""
    return [
        (route, name, method)
        for route, name, callback, _ in API
        # The catch-all is no endpoint: any other path, a JSON 404 (test_api_schema.py).
        if name != "api-not-found"
        for method in sorted(view_methods(callback))
    ]


ENDPOINTS = _endpoints()


def test_every_endpoint_has_a_row():
    missing = [(n, m) for _, n, m in ENDPOINTS if (n, m) not in EXPECTED]
    assert not missing, f"add rows to EXPECTED for {missing}"
    stale = set(EXPECTED) - {(n, m) for _, n, m in ENDPOINTS}
    assert not stale, f"rows without an endpoint: {stale}"


@pytest.fixture
def world(
    cluster,
    gpu,
    alloc_a,
    alloc_b,
    strict_policy,
    admin,
    auditor,
    lead_a,
    member_a,
    other_team_lead,
    settings,
):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"token": None, "address": None, "token_failure": None},
    }
    june_usage_create(alloc_a, alloc_b, gpu)
    suggestion = june_suggestions_create(cluster)["team-a-training"]
    line = [LineInput(alloc_a.team_namespace_id, gpu.pk, 5, 8)]
    submitted = request_create(
        team=lead_a.teams.get(), acting_user=lead_a, justification="less", lines=line, submit=True
    )
    draft = request_create(
        team=lead_a.teams.get(), acting_user=lead_a, justification="less", lines=line
    )
    run = SyncRun.objects.create(cluster=cluster, trigger="manual", mode="enforce")
    DriftEvent.objects.create(cluster=cluster, run=run, kind="Queue", api_version="v1", name="q")
    experiment = PriorityClass.objects.create(name="experiment", value=100)
    limit = RunTimeLimit.objects.create(
        team_namespace=alloc_b.team_namespace, priority_class=experiment, max_seconds=600
    )
    users = {
        "member": member_a,
        "lead": lead_a,
        "other_lead": other_team_lead,
        "admin": admin,
        "auditor": auditor,
    }
    tokens = {role: api_token_create(user=u, name="t")[1] for role, u in users.items()}
    expired_row, tokens["expired"] = api_token_create(user=lead_a, name="old")
    expired_row.expires_at = timezone.now() - timedelta(seconds=1)
    expired_row.save()
    revoked_row, tokens["revoked"] = api_token_create(user=lead_a, name="gone")
    api_token_revoke(token=revoked_row, acting_user=lead_a)
    return {
        "tokens": tokens,
        "ids": {
            "request": submitted.pk,
            "draft": draft.pk,
            "allocation": alloc_a.pk,
            "sync_run": run.pk,
            "suggestion": suggestion.pk,
            "namespace": alloc_a.team_namespace_id,
            "run_time_limit": limit.pk,
        },
    }


def _url(route: str, name: str, method: str, ids: dict) -> str:
    if name == "api-namespace-waiting":
        pk = ids["namespace"]
    elif name == "api-run-time-limit":
        pk = ids["run_time_limit"]
    elif "allocation" in name:
        pk = ids["allocation"]
    elif "sync-run" in name:
        pk = ids["sync_run"]
    elif "suggestion" in name:
        pk = ids["suggestion"]
    elif (name, method) in ON_DRAFT:
        pk = ids["draft"]
    else:
        pk = ids["request"]
    url = route.replace("<int:pk>", str(pk))
    url = url.replace("<slug:slug>", "team-a").replace("<slug:name>", "demo")
    return "/" + url


def _call(token: str | None, method: str, url: str, name: str) -> int:
    client = APIClient()
    if token:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    if method == "GET":
        return client.get(url, QUERIES.get(name, {})).status_code
    return getattr(client, method.lower())(url, BODIES.get(name, {}), format="json").status_code


@pytest.mark.parametrize(
    ("route", "name", "method"), ENDPOINTS, ids=[f"{m} {n}" for _, n, m in ENDPOINTS]
)
def test_permission_matrix(world, route, name, method):
    url = _url(route, name, method, world["ids"])
    expected = {**dict.fromkeys(UNAUTHENTICATED, 401), **EXPECTED[(name, method)]}
    got = {}
    for role in [*ROLES, *UNAUTHENTICATED]:
        with transaction.atomic():  # every role meets the same state
            got[role] = _call(world["tokens"].get(role), method, url, name)
            transaction.set_rollback(True)
    assert got == expected
