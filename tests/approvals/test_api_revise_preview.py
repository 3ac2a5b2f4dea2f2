"""Revising and previewing requests over the API: PATCH requests/<id>/ with the lines as on
create, POST requests/preview/ (unsaved) and POST requests/<id>/preview/ (saved)."""

import pytest

from approvals.models import QuotaRequest
from quotas.kube.sync import cluster_sync
from quotas.models import AuditEvent, Cluster
from tests.support.api import as_user, body

pytestmark = pytest.mark.django_db


def line(guarantee: str, cap: str, **extra) -> dict:
    return {
        "namespace": "team-c-dev",
        "cluster": "demo",
        "resource": "nvidia.com/gpu",
        "guarantee": guarantee,
        "cap": cap,
        **extra,
    }


@pytest.fixture
def draft(plan, lead_c, strict_policy):
    response = as_user(lead_c).post("/api/v1/requests/", body(submit=False), format="json")
    assert response.status_code == 201
    return response.json()


def test_revise_a_draft_replaces_its_lines_and_keeps_the_shape(draft, lead_c):
    client = as_user(lead_c)
    response = client.patch(
        f"/api/v1/requests/{draft['id']}/",
        {"lines": [line("1", "3", per_pod_max="2")], "justification": "less is enough"},
        format="json",
    )
    assert response.status_code == 200, response.content
    revised = response.json()
    assert set(revised) == set(draft)  # the same shape as create and GET
    assert revised["justification"] == "less is enough"
    assert revised["status"] == "draft"
    (got,) = revised["lines"]
    assert got["requested"] == {
        "guarantee": "1",
        "cap": "3",
        "per_pod_max": "2",
        "priority_classes": [],
    }
    assert AuditEvent.objects.filter(action="request.revised", target_id=str(draft["id"])).exists()


def test_revise_and_submit_in_one_step(draft, lead_c):
    response = as_user(lead_c).patch(
        f"/api/v1/requests/{draft['id']}/",
        {"lines": [line("3", "4")], "submit": True},
        format="json",
    )
    assert response.status_code == 200
    assert response.json()["status"] == "submitted"


def test_revise_after_changes_requested(draft, lead_c, admin):
    lead = as_user(lead_c)
    assert (
        lead.post(f"/api/v1/requests/{draft['id']}/submit/", {}, format="json").status_code == 200
    )
    sent_back = as_user(admin).post(
        f"/api/v1/requests/{draft['id']}/changes/", {"comment": "smaller"}, format="json"
    )
    assert sent_back.json()["status"] == "changes_requested"
    response = lead.patch(
        f"/api/v1/requests/{draft['id']}/", {"lines": [line("2", "3")]}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["lines"][0]["requested"]["cap"] == "3"


def test_revise_a_submitted_request_is_refused(draft, lead_c):
    lead = as_user(lead_c)
    lead.post(f"/api/v1/requests/{draft['id']}/submit/", {}, format="json")
    response = lead.patch(
        f"/api/v1/requests/{draft['id']}/", {"lines": [line("2", "3")]}, format="json"
    )
    assert response.status_code == 409
    assert set(response.json()) == {"message", "extra"}


def test_revise_names_the_bad_field(draft, lead_c):
    response = as_user(lead_c).patch(
        f"/api/v1/requests/{draft['id']}/", {"lines": [line("5", "3")]}, format="json"
    )
    assert response.status_code == 400
    assert "guarantee" in response.json()["message"]
    missing = as_user(lead_c).patch(f"/api/v1/requests/{draft['id']}/", {}, format="json")
    assert missing.status_code == 400
    assert missing.json()["extra"]["field"] == "lines"


def test_preview_of_an_unsaved_request_says_what_submit_would_meet_and_keeps_nothing(
    plan, lead_c, strict_policy
):
    client = as_user(lead_c)
    requests_before = QuotaRequest.objects.count()
    events_before = AuditEvent.objects.count()
    response = client.post("/api/v1/requests/preview/", body("3", "10"), format="json")
    assert response.status_code == 200, response.content
    check = response.json()
    assert check["judged_as"] == "submit"
    assert check["fits"] is False
    assert any(
        e["rule"] and "exceeds 50%" in e["message"] and e["field"].endswith("cap")
        for e in check["errors"]
    ), check["errors"]
    assert check["lines"][0]["requested"]["cap"] == "10"
    assert "id" not in check["lines"][0]
    assert check["clusters"] is None  # leads see no cluster objects
    assert QuotaRequest.objects.count() == requests_before
    assert AuditEvent.objects.count() == events_before


def test_preview_tells_the_policy_decision(plan, lead_c, strict_policy):
    check = as_user(lead_c).post("/api/v1/requests/preview/", body("3", "6"), format="json").json()
    assert check["fits"] is True and check["errors"] == []
    assert check["policy"] == {
        "auto_approve": False,
        "approvals_needed": 1,
        "reason": "one platform admin must approve",
    }


def test_preview_is_refused_as_create_would_be(plan, lead_a, member_a, strict_policy):
    response = as_user(lead_a).post("/api/v1/requests/preview/", body(), format="json")
    assert response.status_code == 400
    assert response.json()["extra"]["field"] == "team"


def test_admin_preview_of_a_saved_request_shows_the_cluster_diff(
    plan, lead_c, admin, strict_policy, kube_sandbox
):
    cluster = plan["team-c"].cluster
    Cluster.objects.filter(pk=cluster.pk).update(sandbox_url=kube_sandbox.url)
    assert cluster_sync(cluster_id=cluster.pk).status == "succeeded"
    created = as_user(lead_c).post("/api/v1/requests/", body("3", "6"), format="json").json()
    kube_sandbox.stats.reset()
    response = as_user(admin).post(f"/api/v1/requests/{created['id']}/preview/", format="json")
    assert response.status_code == 200, response.content
    check = response.json()
    assert check["judged_as"] == "approve"
    assert check["cluster_error"] == ""
    (demo,) = check["clusters"]
    assert demo["cluster"] == "demo"
    quota = next(o for o in demo["objects"] if o["kind"] == "ResourceQuota")
    assert quota["namespace"] == "team-c-dev" and quota["name"] == "gpu-quota"
    assert {"path": "spec.hard.requests.nvidia.com/gpu", "old": "4", "new": "6"} in quota["diff"]
    assert kube_sandbox.stats.writes == 0
    # The lead sees the findings, not the cluster objects.
    lead_view = as_user(lead_c).post(f"/api/v1/requests/{created['id']}/preview/", format="json")
    assert lead_view.json()["clusters"] is None


def test_preview_of_a_stale_request_lists_the_changed_fields(plan, lead_c, admin, strict_policy):
    from quotas.services import allocation_set

    created = as_user(lead_c).post("/api/v1/requests/", body("3", "6"), format="json").json()
    ns = plan["team-c"]
    allocation_set(
        team_namespace=ns,
        resource=ns.allocations.get().resource,
        guarantee=2,
        cap=5,
        acting_user=admin,
    )
    check = as_user(admin).post(f"/api/v1/requests/{created['id']}/preview/").json()
    assert check["fits"] is False
    assert [(s["field"], s["base"], s["current"]) for s in check["stale"]] == [("cap", "4", "5")]
