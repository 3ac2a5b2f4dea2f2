"""Every page of the portal in 简体中文 has no English a person reads: each GET page of the URL
conf, opened by a team lead, a platform admin and the read-only viewer in a world with data on
every page (requests in every state with findings and policies, usage with charts, suggestions,
a temporary grant in force, syncs, drift and audit entries), the text nodes, the attributes a
browser shows and the texts of the plotly figures (titles, axes, legends, hover templates).

The URL list is the URL conf's: a new page without arguments here, or a new page under a
pattern nobody excluded, fails until it is added to one of the tables below."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import transaction
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from approvals.lifecycle import (
    request_approve,
    request_changes,
    request_create,
    request_reject,
    request_withdraw,
)
from approvals.lines import LineInput
from approvals.models import ApprovalPolicy, QuotaRequest
from approvals.transitions import transition
from portal.models import ApiToken
from portal.tokens import api_token_create
from quotas.models import (
    Cluster,
    DriftEvent,
    PriorityClass,
    Resource,
    SyncRequest,
    SyncRun,
    Team,
    TeamNamespace,
)
from tests.support.visible_text import english_runs, figures_of, visible_texts
from usage.models import Suggestion, UsageDaily, UsageSample
from usage.suggestions import previous_month, suggestions_compute

pytestmark = pytest.mark.django_db

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9"}
S = QuotaRequest.Status

# Address prefixes no page of this test lives under, and why.
EXCLUDED_PREFIXES = {
    # JSON for programs (its messages follow Accept-Language: tests/portal/test_i18n.py).
    "api/v1/": "the REST API answers JSON, not pages",
    "api/schema/": "the OpenAPI document, for programs",
    # Django's admin: Django's own catalogue translates its frame; the portal's model and field
    # names in it are marked and caught by the catalogue test (tests/portal/test_translations.py).
    "admin/": "Django's admin, translated by Django's catalogue and the model names",
}
# Named addresses that are no page a person reads, and why.
EXCLUDED_NAMES = {
    "api-docs": "Swagger UI draws the API's own (English, for developers) descriptions",
    "healthz": "a probe's plain answer, for the orchestrator",
    "readyz": "a probe's plain answer, for the orchestrator",
    "favicon": "an image",
    "sso-login": "sends the browser on to the sign-in provider (404 without single sign-on)",
    "sso-callback": "the provider's way back: a redirect, never a page",
    "usage-export": "CSV whose header is the rollups' field names, as the API's",
    "showback-export": "CSV whose header is the API's field names",
    "audit-export": "CSV of the audit log, for tools",
    "javascript-catalog": "not a page",
}
# Addresses that take no GET (checked: a GET is refused or sent on, so no page hides behind
# them; Django's set_language sends a GET back where it came from).
POST_ONLY = {
    "logout",
    "set_language",
    "tokens-revoke",
    "requests-validate",
    "requests-validate-edit",
    "requests-action",
    "requests-comment",
    "requests-extend",
    "requests-bulk",
}
# Pages still known to show English, and why: each must still show some (the test fails
# when one is fixed, so that it leaves this list), and no other page may.
UNFINISHED = {}
# Pages only an anonymous visitor sees (signed in, the login page sends one home).
ANONYMOUS = {"login"}


def _patterns(resolver: URLResolver = None, prefix: str = ""):
    """(name, route) of every URL pattern, included ones too, with their full route."""
    resolver = resolver or get_resolver()
    for entry in resolver.url_patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from _patterns(entry, route)
        elif isinstance(entry, URLPattern):
            yield entry.name, route


# --- the world ---------------------------------------------------------------------------


def _line(ns: TeamNamespace, resource: Resource, guarantee, cap, per_pod_max=None) -> LineInput:
    return LineInput(ns.pk, resource.pk, Decimal(guarantee), Decimal(cap), per_pod_max)


def _usage(ns: TeamNamespace, resource: Resource, days: int, level: int) -> None:
    today = timezone.localdate()
    for back in range(days):
        UsageDaily.objects.create(
            team_namespace=ns,
            resource=resource,
            day=today - timedelta(days=back),
            source="cluster",
            samples=288,
            peak=Decimal(level + back % 3),
            p95=Decimal(level),
            mean=Decimal(level - 1),
            utilization_mean=Decimal("41.5"),
            gpu_hours=Decimal(24 * (level - 1)),
            borrowed_gpu_hours=Decimal(back % 4),
            idle_guaranteed_gpu_hours=Decimal(back % 2),
            guarantee=Decimal(2),
            pending_peak=Decimal(back % 2),
            pending_wait_seconds=Decimal(30 * (back % 3)),
            evictions=back % 2,
        )
    # A few samples two days ago (the request pages replay them under the requested values),
    # and the newest reading a few minutes ago.
    for hours in (50, 49, 48):
        UsageSample.objects.create(
            team_namespace=ns,
            resource=resource,
            timestamp=timezone.now() - timedelta(hours=hours),
            allocated=Decimal(level),
            pending=Decimal(1),
            source="cluster",
        )
    UsageSample.objects.create(
        team_namespace=ns,
        resource=resource,
        timestamp=timezone.now() - timedelta(minutes=3),
        allocated=Decimal(level),
        source="cluster",
    )


@pytest.fixture
def world(db, settings):
    settings.AUDIT_USERS_WRITTEN_ELSEWHERE = True
    call_command("seed_demo", stdout=open("/dev/null", "w"))  # noqa: SIM115
    users = {u.username: u for u in User.objects.all()}
    ns = {n.name: n for n in TeamNamespace.objects.select_related("cluster", "team")}
    gpu = Resource.objects.get(name="nvidia.com/gpu")
    mig = Resource.objects.get(name="nvidia.com/mig-1g.10gb")
    lead_a, lead_c = users["lead-a"], users["lead-c"]
    admin, admin2 = users["admin"], users["admin2"]
    team_a = Team.objects.get(slug="team-a")
    team_c = Team.objects.get(slug="team-c")
    # Usage of every namespace: a month and more of days, the newest reading a few minutes ago.
    for name, namespace in ns.items():
        resource = mig if namespace.cluster.name == "demo-mig" else gpu
        if name == "team-a-inference":
            resource = Resource.objects.get(name="nvidia.com/mig-3g.40gb")
        _usage(namespace, resource, 40, 3)
    for cluster in Cluster.objects.all():
        suggestions_compute(cluster=cluster, month=previous_month(timezone.localdate()))
        suggestions_compute(cluster=cluster, month=timezone.localdate().replace(day=1))

    def made(team, user, lines, **kwargs) -> QuotaRequest:
        return request_create(
            team=team, acting_user=user, justification="需要更多训练", lines=lines, **kwargs
        )

    for cluster in Cluster.objects.all():  # nothing approved by itself: every state by hand
        ApprovalPolicy.objects.update_or_create(
            cluster=cluster,
            defaults={"auto_approve_decreases": False, "auto_approve_increase_max": 0},
        )
    c_dev = TeamNamespace.objects.get(name="team-c-dev", cluster__name="demo")
    c_mig = TeamNamespace.objects.get(name="team-c-dev", cluster__name="demo-mig")
    a_training = ns["team-a-training"]
    made(team_c, lead_c, [_line(c_dev, gpu, 2, 3)])  # a draft
    made(team_c, lead_c, [_line(c_dev, gpu, 3, 5)], submit=True)  # a large jump: warned
    made(team_c, lead_c, [_line(c_mig, mig, 3, 5)], submit=True)
    rejected = made(team_c, lead_c, [_line(c_dev, gpu, 3, 5)], submit=True)
    request_reject(request=rejected, acting_user=admin, comment="容量不足")
    changes = made(team_c, lead_c, [_line(c_dev, gpu, 2, 5)], submit=True)
    request_changes(request=changes, acting_user=admin, comment="请说明用途")
    withdrawn = made(team_c, lead_c, [_line(c_dev, gpu, 1, 4)], submit=True)
    request_withdraw(request=withdrawn, acting_user=lead_c, comment="不需要了")
    # Above the threshold two admins decide: one approval given, one to come.
    big = made(team_a, admin, [_line(a_training, gpu, 6, 8, 8)], submit=True)
    request_approve(request=big, acting_user=admin2, comment="可以")
    applying = made(team_c, lead_c, [_line(c_mig, mig, 2, 5)], submit=True)
    request_approve(request=applying, acting_user=admin, comment="批准")
    later = made(
        team_c,
        lead_c,
        [_line(c_dev, gpu, 2, 4)],
        kind=QuotaRequest.Kind.TEMPORARY,
        starts_at=timezone.now() + timedelta(days=2),
        ends_at=timezone.now() + timedelta(days=4),
        submit=True,
    )
    request_approve(request=later, acting_user=admin)  # approved, waiting for its start
    # What the clusters' syncs and the grants' clock do, moved here by the transitions.
    ends = {"ends_at": timezone.now() + timedelta(days=5), "kind": QuotaRequest.Kind.TEMPORARY}
    for steps, kind in (
        ([S.APPROVED, S.APPLYING, S.APPLIED], {}),
        ([S.APPROVED, S.APPLYING, S.FAILED], {}),
        ([S.APPROVED, S.APPLYING, S.ACTIVE], ends),
        ([S.APPROVED, S.APPLYING, S.ACTIVE, S.EXPIRED], ends),
        ([S.APPROVED, S.REVOKED], ends),
    ):
        request = made(team_c, lead_c, [_line(c_mig, mig, 2, 4)], submit=True, **kind)
        with transaction.atomic():
            for step in steps:
                transition(request, step, acting_user=admin if step == S.APPROVED else None)
    # Syncs, a failed one and drift found (the admin's cluster pages).
    for cluster in Cluster.objects.all():
        run = SyncRun.objects.create(
            cluster=cluster, trigger=SyncRun.Trigger.CHANGE, mode="enforce", status="failed"
        )
        SyncRequest.objects.create(cluster=cluster, status="pending")
        DriftEvent.objects.create(
            cluster=cluster,
            run=run,
            api_version="v1",
            kind="ResourceQuota",
            namespace="team-a-training",
            name="gpu-quota",
            changes=[{"path": "spec.hard.requests.nvidia.com/gpu", "old": "4", "new": "9"}],
        )
    for user in (lead_a, admin, users["viewer"]):
        api_token_create(user=user, name="ci 流水线")
    assert set(QuotaRequest.objects.values_list("status", flat=True)) == set(S.values)
    return users


def _names() -> set[str]:
    """What the data names and what people typed: kept as written in every language."""
    names: set[str] = {settings.QUOTA_CURRENCY}  # the configured currency's ISO code
    for team in Team.objects.all():
        names |= {team.slug, team.name}
    for cluster in Cluster.objects.all():
        names |= {cluster.name, cluster.display_name}
    names |= set(TeamNamespace.objects.values_list("name", flat=True))
    for resource in Resource.objects.all():
        names |= {resource.name, resource.display_name, resource.gpu_model}
    for pc in PriorityClass.objects.all():
        names |= {pc.name, pc.description}
    for user in User.objects.all():
        names |= {user.username, user.first_name, user.last_name, user.email}
    for qr in QuotaRequest.objects.all():
        names |= {qr.justification, qr.decision_comment}
    for token in ApiToken.objects.all():
        names |= {token.name, token.label}
    return names


def _paths(world) -> dict[str, list[str]]:
    """The concrete addresses of every named page: one per object of each kind."""
    requests = list(QuotaRequest.objects.order_by("pk").values_list("pk", "status"))
    editable = [pk for pk, status in requests if status in (S.DRAFT, S.CHANGES_REQUESTED)]
    return {
        "cluster-detail": [
            f"/clusters/{name}/" for name in Cluster.objects.values_list("name", flat=True)
        ],
        "requests-detail": [f"/requests/{pk}/" for pk, _ in requests],
        "requests-preview": [f"/requests/{pk}/preview/" for pk, _ in requests],
        # The parts of a request's page that update by themselves, as the page polls them.
        "requests-live": [f"/requests/{pk}/live/" for pk, _ in requests],
        "requests-edit": [f"/requests/{pk}/edit/" for pk in editable],
        "team-waiting": [
            f"/waiting/{slug}/" for slug in Team.objects.values_list("slug", flat=True)
        ],
        "suggestion-request": [
            f"/requests/from-suggestion/{pk}/"
            for pk in Suggestion.objects.order_by("pk").values_list("pk", flat=True)
        ],
    }


def _pages(world) -> list[tuple[str, str]]:
    """(name, path) of every page to read; fails on a pattern none of the tables covers."""
    with_args = _paths(world)
    pages, unknown = [], []
    for name, route in _patterns():
        if any(route.startswith(prefix) for prefix in EXCLUDED_PREFIXES) or name in EXCLUDED_NAMES:
            continue
        if "<" in route:
            if name in POST_ONLY:
                continue
            if name not in with_args:
                unknown.append(route)
                continue
            pages += [(name, path) for path in with_args[name]]
        else:
            pages.append((name, "/" + route))
    assert unknown == [], "a page with arguments this test does not know: add it to _paths"
    return pages


def test_every_page_in_chinese_has_no_english(client, world):
    users = world
    personas = {
        "lead-c": users["lead-c"],
        "lead-a": users["lead-a"],
        "admin": users["admin"],
        "viewer": users["viewer"],
    }
    names = _names()
    found: dict[str, list[str]] = {}
    unfinished_english: set[str] = set()
    read_by_someone: dict[str, bool] = {}
    charts_seen = 0
    pages = _pages(world)
    for name, path in pages:
        if name in POST_ONLY:
            client.force_login(users["admin"])
            assert client.get(path, **ZH).status_code in (302, 405), f"{path} answers a GET"
            continue
        read_by_someone.setdefault(path, False)
        who = {"anonymous": None} if name in ANONYMOUS else personas
        for persona, user in who.items():
            client.logout()
            if user is not None:
                client.force_login(user)
            response = client.get(path, **ZH)
            if response.status_code != 200 or "text/html" not in response["Content-Type"]:
                continue  # refused, absent or sent on: not this persona's page
            read_by_someone[path] = True
            html = response.content.decode()
            charts_seen += len(figures_of(html))
            runs = english_runs(visible_texts(html), names=names)
            if name in UNFINISHED:
                unfinished_english |= {name} if runs else set()
                continue
            for run in runs:
                found.setdefault(run, []).append(f"{persona} {path}")
    assert [path for path, read in read_by_someone.items() if not read] == []
    assert charts_seen > 10  # the dashboard, clusters and usage pages drew their charts
    report = [f"{run}  ({', '.join(sorted(set(where))[:3])})" for run, where in found.items()]
    assert report == [], "English on Chinese pages:\n" + "\n".join(report)
    assert unfinished_english == set(UNFINISHED), "translated now: take it off UNFINISHED"
