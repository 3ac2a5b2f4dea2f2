"""Quota data over the API: the same rows as the UI, amounts as strings, scoped by role."""

import pytest
from rest_framework.test import APIClient

from quotas.selectors import allocations_visible_to
from tests.support.api import as_user

# The seed's plan (demo: 16 GPUs; teams A 6/10, B 4/6, C 2/4) and the lead of team C.

pytestmark = pytest.mark.django_db


def results(response) -> list[dict]:
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_lead_sees_only_own_team(plan, lead_c):
    api = as_user(lead_c)
    assert [t["slug"] for t in results(api.get("/api/v1/teams/"))] == ["team-c"]
    rows = results(api.get("/api/v1/allocations/"))
    assert [(r["team"], r["namespace"]) for r in rows] == [("team-c", "team-c-dev")]
    assert api.get("/api/v1/teams/team-a/").status_code == 404


def test_team_detail(plan, lead_c):
    body = as_user(lead_c).get("/api/v1/teams/team-c/").json()
    assert body["slug"] == "team-c"
    assert body["namespaces"] == [
        {"name": "team-c-dev", "cluster": "demo", "workload_class": "training", "shadow": False}
    ]


def test_admin_sees_every_allocation_as_the_ui_does(plan, admin):
    rows = results(as_user(admin).get("/api/v1/allocations/"))
    assert {r["id"] for r in rows} == set(
        allocations_visible_to(admin).values_list("id", flat=True)
    )
    a = next(r for r in rows if r["namespace"] == "team-a-training")
    assert a["cluster"] == "demo"
    assert a["team"] == "team-a"
    assert a["resource"] == "nvidia.com/gpu"
    assert (a["guarantee"], a["cap"], a["per_pod_max"]) == ("6", "10", None)
    assert a["priority_classes"] == []
    assert a["version"] == 1
    assert "T" in a["updated_at"]  # ISO 8601


@pytest.mark.parametrize(
    ("query", "namespaces"),
    [
        ("team=team-b", ["team-b-inference"]),
        ("namespace=team-c-dev", ["team-c-dev"]),
        (
            "cluster=demo&resource=nvidia.com/gpu",
            ["team-a-training", "team-b-inference", "team-c-dev"],
        ),
        ("cluster=elsewhere", []),
    ],
)
def test_allocation_filters(plan, admin, query, namespaces):
    rows = results(as_user(admin).get(f"/api/v1/allocations/?{query}"))
    assert [r["namespace"] for r in rows] == namespaces


def test_lists_are_paginated(plan, admin):
    body = as_user(admin).get("/api/v1/allocations/?page_size=2").json()
    assert body["count"] == 3
    assert len(body["results"]) == 2
    assert "page=2" in body["next"] and body["previous"] is None


def test_clusters_for_admins_and_auditors(plan, admin, auditor):
    for user in (admin, auditor):
        (demo,) = results(as_user(user).get("/api/v1/clusters/"))
        assert demo["name"] == "demo"
        assert demo["sync_mode"] == "enforce"
        assert demo["backends"] == ["core", "volcano"]
        assert demo["max_cap_share"] == "0.5"
        (gpu,) = demo["resources"]
        assert gpu["resource"] == "nvidia.com/gpu"
        assert (gpu["capacity"], gpu["guaranteed"], gpu["capped"]) == ("16", "12", "20")
        assert gpu["free_guarantee"] == "4"
        assert gpu["over_promised"] is False


def test_clusters_refused_to_leads(plan, lead_c):
    response = as_user(lead_c).get("/api/v1/clusters/")
    assert response.status_code == 403
    assert response.json() == {
        "message": "only platform admins and auditors see the whole plan",
        "extra": {},
    }


def test_plan_violations_point_out_the_seed_cap(plan, auditor, lead_c):
    rows = results(as_user(auditor).get("/api/v1/plan/violations/"))
    errors = [r for r in rows if r["level"] == "error"]
    assert any(
        r["namespace"] == "team-a-training"
        and r["message"].startswith("cap 10 exceeds 50% of cluster demo capacity 16")
        for r in errors
    )
    assert as_user(lead_c).get("/api/v1/plan/violations/").status_code == 403


def test_anonymous_is_refused(plan):
    for url in ("/api/v1/teams/", "/api/v1/allocations/", "/api/v1/clusters/"):
        assert APIClient().get(url).status_code in (401, 403)


def test_session_login_works_too(plan, client, lead_c):
    client.force_login(lead_c)
    response = client.get("/api/v1/allocations/")
    assert response.status_code == 200
    assert [r["namespace"] for r in response.json()["results"]] == ["team-c-dev"]
