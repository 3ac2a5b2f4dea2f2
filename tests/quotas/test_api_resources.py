"""The quota resources of the API: clusters without credentials, team namespaces, allocation
history, sync runs and drift, audit events and daily usage, each scoped like the pages."""

from datetime import date

import pytest

from approvals.lifecycle import request_approve, request_create
from approvals.lines import LineInput
from quotas.models import Cluster, DriftEvent, SyncObjectResult, SyncRun
from tests.support.api import as_user
from tests.support.usage import june_usage_create

pytestmark = pytest.mark.django_db


def test_clusters_show_capacity_and_free_guarantee_never_the_connection(
    alloc_a, alloc_b, admin, auditor
):
    Cluster.objects.filter(name="demo").update(
        kubeconfig_path="/secret/kubeconfig", kubeconfig_context="prod-admin"
    )
    listed = as_user(auditor).get("/api/v1/clusters/").json()["results"]
    one = as_user(admin).get("/api/v1/clusters/demo/").json()
    assert listed == [one]
    (gpu,) = one["resources"]
    assert (gpu["capacity"], gpu["guaranteed"], gpu["free_guarantee"]) == ("16", "10", "6")
    text = str(one)
    assert "kubeconfig" not in text and "prod-admin" not in text and "sandbox" not in text
    assert as_user(admin).get("/api/v1/clusters/nope/").status_code == 404


def test_namespaces_of_the_teams_one_sees(ns_a, ns_b, lead_a, admin):
    mine = as_user(lead_a).get("/api/v1/namespaces/").json()["results"]
    assert [n["name"] for n in mine] == ["team-a-training"]
    assert mine[0]["team"] == "team-a" and mine[0]["cluster"] == "demo"
    every = as_user(admin).get("/api/v1/namespaces/", {"team": "team-b"}).json()["results"]
    assert [n["name"] for n in every] == ["team-b-inference"]
    bad = as_user(admin).get("/api/v1/namespaces/", {"cluster": "nope"})
    assert bad.status_code == 400 and bad.json()["extra"]["field"] == "cluster"
    hidden = as_user(lead_a).get("/api/v1/namespaces/", {"team": "team-b"})
    assert hidden.status_code == 400 and hidden.json()["extra"]["field"] == "team"


def test_allocation_and_its_versions_newest_first(alloc_a, gpu, lead_a, admin, strict_policy):
    qr = request_create(
        team=alloc_a.team_namespace.team,
        acting_user=lead_a,
        justification="within the rule",
        lines=[LineInput(alloc_a.team_namespace_id, gpu.pk, 5, 8)],
        submit=True,
    )
    request_approve(request=qr, acting_user=admin)
    client = as_user(lead_a)
    detail = client.get(f"/api/v1/allocations/{alloc_a.pk}/").json()
    assert (detail["guarantee"], detail["cap"], detail["version"]) == ("5", "8", 2)
    versions = client.get(f"/api/v1/allocations/{alloc_a.pk}/versions/").json()["results"]
    assert [(v["version"], v["guarantee"], v["cap"]) for v in versions] == [
        (2, "5", "8"),
        (1, "6", "10"),
    ]
    assert versions[0]["source"] == f"request:{qr.pk}"
    assert versions[0]["changed_by"] == "admin"


def test_sync_runs_with_their_objects_and_drift(cluster, admin, lead_a):
    run = SyncRun.objects.create(
        cluster=cluster, trigger="change", mode="enforce", status="failed", error="boom"
    )
    SyncObjectResult.objects.create(
        run=run,
        api_version="v1",
        kind="ResourceQuota",
        namespace="team-a-training",
        name="gpu-quota",
        action="updated",
        diff=[{"path": "spec.hard.requests.nvidia.com/gpu", "old": "10", "new": "8"}],
    )
    DriftEvent.objects.create(
        cluster=cluster,
        run=run,
        api_version="v1",
        kind="ResourceQuota",
        name="gpu-quota",
        namespace="team-a-training",
        changes=[{"path": "x", "old": "1", "new": "2"}],
    )
    client = as_user(admin)
    runs = client.get("/api/v1/sync-runs/", {"cluster": "demo", "status": "failed"}).json()
    assert [r["id"] for r in runs["results"]] == [run.pk]
    detail = client.get(f"/api/v1/sync-runs/{run.pk}/").json()
    assert detail["error"] == "boom"
    assert detail["results"][0]["kind"] == "ResourceQuota"
    assert detail["results"][0]["diff"][0]["new"] == "8"
    drift = client.get("/api/v1/drift/", {"cluster": "demo"}).json()["results"]
    assert drift[0]["run"] == run.pk and drift[0]["restored"] is False
    bad = client.get("/api/v1/sync-runs/", {"status": "bogus"})
    assert bad.status_code == 400 and bad.json()["extra"]["field"] == "status"
    assert as_user(lead_a).get("/api/v1/drift/").status_code == 403


def test_audit_events_with_chain_fields_and_filters(alloc_a, admin, auditor, lead_a):
    client = as_user(auditor)
    events = client.get("/api/v1/audit-events/", {"actor": "admin"}).json()["results"]
    assert events and all(e["actor"] == "admin" for e in events)
    first = events[-1]
    assert {"seq", "prev_hash", "hash", "mac", "mac_key_id"} <= set(first)
    assert len(first["hash"]) == 64 and len(first["mac"]) == 64
    by_prefix = client.get("/api/v1/audit-events/", {"action": "allocation."}).json()["results"]
    assert by_prefix and all(e["action"].startswith("allocation.") for e in by_prefix)
    future = client.get("/api/v1/audit-events/", {"since": "2999-01-01"}).json()
    assert future["results"] == []
    today = date.today().isoformat()
    assert client.get("/api/v1/audit-events/", {"until": today}).json()["results"]
    bad = client.get("/api/v1/audit-events/", {"since": "yesterday"})
    assert bad.status_code == 400 and bad.json()["extra"]["field"] == "since"
    backwards = client.get("/api/v1/audit-events/", {"since": "2026-02-01", "until": "2026-01-01"})
    assert backwards.status_code == 400 and backwards.json()["extra"]["field"] == "until"
    assert as_user(lead_a).get("/api/v1/audit-events/").status_code == 403


def test_daily_usage_leads_see_their_teams(alloc_a, alloc_b, gpu, lead_a, admin):
    june_usage_create(alloc_a, alloc_b, gpu)
    period = {"start": "2025-06-01", "end": "2025-06-02"}
    mine = as_user(lead_a).get("/api/v1/usage/daily/", period).json()
    assert mine["count"] == 2
    assert {d["namespace"] for d in mine["results"]} == {"team-a-training"}
    day = mine["results"][0]
    assert (day["day"], day["peak"], day["mean"], day["gpu_hours"]) == (
        "2025-06-01",
        "3",
        "2",
        "48",
    )
    every = as_user(admin).get("/api/v1/usage/daily/", {**period, "team": "team-b"}).json()
    assert {d["team"] for d in every["results"]} == {"team-b"} and every["count"] == 2
    missing = as_user(admin).get("/api/v1/usage/daily/", {"start": "2025-06-01"})
    assert missing.status_code == 400 and missing.json()["extra"]["field"] == "end"


@pytest.mark.parametrize(
    ("path", "query", "field", "message"),
    [
        ("/api/v1/sync-runs/", {"trigger": "cron"}, "trigger", "trigger: 'cron' is not one of "),
        ("/api/v1/sync-runs/", {"page": "0"}, "page", "page: must be a positive integer"),
        ("/api/v1/drift/", {"restored": "maybe"}, "restored", "restored: 'maybe' is not true"),
        ("/api/v1/drift/", {"page_size": "x"}, "page_size", "page_size: must be a positive"),
        ("/api/v1/audit-events/", {"until": "2026-02-30"}, "until", "until: give a time as"),
        ("/api/v1/audit-events/", {"page": "-1"}, "page", "page: must be a positive integer"),
        ("/api/v1/namespaces/", {"cluster": "nope"}, "cluster", "cluster: no cluster named"),
        ("/api/v1/allocations/1/versions/", {"page": "a"}, "page", "page: must be a positive"),
        (
            "/api/v1/usage/daily/",
            {"start": "2025-01-01", "end": "2026-02-05"},
            "end",
            "end: at most 400 days from start",
        ),
        ("/api/v1/usage/daily/", {"end": "2025-01-01"}, "start", "start: required, a day as"),
        (
            "/api/v1/usage/daily/",
            {"start": "2025-01-01", "end": "2025-01-02", "resource": "bad name!"},
            "resource",
            "resource: a name of letters",
        ),
    ],
)
def test_bad_filters_and_paging_of_the_resource_lists_are_a_400_naming_them(
    alloc_a, admin, path, query, field, message
):
    path = path.replace("/1/", f"/{alloc_a.pk}/")
    response = as_user(admin).get(path, query)
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["extra"]["field"] == field and body["message"].startswith(message), body


def test_empty_filters_mean_not_given(cluster, admin):
    run = SyncRun.objects.create(cluster=cluster, trigger="manual", mode="enforce")
    DriftEvent.objects.create(cluster=cluster, run=run, kind="Queue", api_version="v1", name="q")
    DriftEvent.objects.create(
        cluster=cluster, run=run, kind="Queue", api_version="v1", name="r", restored=True
    )
    client = as_user(admin)
    assert client.get("/api/v1/drift/", {"restored": ""}).json()["count"] == 2
    assert client.get("/api/v1/drift/", {"restored": "true"}).json()["count"] == 1
    assert client.get("/api/v1/drift/", {"restored": "false"}).json()["count"] == 1
    assert client.get("/api/v1/sync-runs/", {"status": "", "cluster": ""}).json()["count"] == 1


def test_a_filter_or_page_given_twice_is_a_400_naming_it(alloc_a, admin):
    # Found by the fuzzing: ?target_id=&target_id=x was read as its last value, a 200.
    client = as_user(admin)
    for path, query, field in [
        ("/api/v1/audit-events/", "target_id=&target_id=%F0%A5%AD%A3", "target_id"),
        ("/api/v1/namespaces/", "team=team-a&team=team-a", "team"),
        ("/api/v1/teams/", "page=1&page=1", "page"),
    ]:
        response = client.get(f"{path}?{query}")
        assert response.status_code == 400, response.content
        body = response.json()
        assert body["extra"]["field"] == field
        assert body["message"] == f"{field}: give it once, got 2 values"


def test_audit_filters_refuse_what_no_event_holds(alloc_a, admin):
    # Found by the fuzzing: ?target_id={'': ['null']} (an object sent as text) answered 200.
    client = as_user(admin)
    for field, value in [
        ("target_id", "{'': ['null']}"),
        ("target_type", "Quota Request"),
        ("action", "request approval"),
        ("actor", "ad min"),
    ]:
        response = client.get("/api/v1/audit-events/", {field: value})
        assert response.status_code == 400, response.content
        assert response.json()["extra"]["field"] == field
    assert client.get("/api/v1/audit-events/", {"target_type": "Allocation"}).json()["results"]
