"""Quota requests over the API: create and submit with a token, decide, and every refusal as
{"message", "extra"} with the status the services chose."""

import pytest
from rest_framework.test import APIClient

from approvals.models import QuotaRequest
from quotas.models import Allocation, AuditEvent
from tests.support.api import as_user, body
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db


@pytest.fixture
def submitted(plan, gpu, lead_c, strict_policy):
    response = as_user(lead_c).post("/api/v1/requests/", body(), format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_create_and_submit_with_a_token(submitted, lead_c):
    assert submitted["status"] == "submitted"
    assert submitted["team"] == "team-c"
    assert submitted["requested_by"] == "lead-c"
    assert submitted["approvals"] == []
    assert "T" in submitted["submitted_at"]
    (line,) = submitted["lines"]
    assert (line["namespace"], line["cluster"], line["resource"]) == (
        "team-c-dev",
        "demo",
        "nvidia.com/gpu",
    )
    assert line["current"] == {
        "guarantee": "2",
        "cap": "4",
        "per_pod_max": None,
        "priority_classes": [],
        "version": 1,
    }
    assert line["requested"] == {
        "guarantee": "3",
        "cap": "6",
        "per_pod_max": None,
        "priority_classes": [],
    }
    assert line["decided"] is None
    assert QuotaRequest.objects.get(pk=submitted["id"]).status == "submitted"


def test_create_a_draft(plan, lead_c):
    response = as_user(lead_c).post(
        "/api/v1/requests/", body(per_pod_max="2", submit=False), format="json"
    )
    assert response.status_code == 201
    assert response.json()["status"] == "draft"
    assert response.json()["lines"][0]["requested"]["per_pod_max"] == "2"


def test_cap_above_the_share_is_400_naming_the_rule(plan, lead_c, strict_policy):
    response = as_user(lead_c).post("/api/v1/requests/", body(cap="9"), format="json")
    assert response.status_code == 400
    error = response.json()
    assert error["message"] == (
        "cap 9 exceeds 50% of cluster demo capacity 16 nvidia.com/gpu (max 8)"
    )
    assert error["extra"]["field"] == "cap"
    assert error["extra"]["errors"][0]["rule"]
    assert "warnings" in error["extra"]
    # A refused create-and-submit creates nothing: no draft, no audit event.
    assert "request" not in error["extra"]
    assert not QuotaRequest.objects.exists()
    assert not AuditEvent.objects.filter(target_type="QuotaRequest").exists()


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ({"namespace": "no-such-ns"}, "lines[0].namespace"),
        ({"namespace": "team-a-training"}, "lines[0].namespace"),  # not lead-c's team
        ({"resource": "amd.com/gpu"}, "lines[0].resource"),
        ({"cap": "lots"}, "lines[0].cap"),
        ({"guarantee": "7"}, "lines[0].guarantee"),
    ],
)
def test_bad_lines_are_400_naming_the_field(plan, lead_c, line, field):
    payload = body()
    payload["lines"][0].update(line)
    response = as_user(lead_c).post("/api/v1/requests/", payload, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["extra"]["field"] == field
    assert response.json()["message"].startswith(field)


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"team": "team-zz"}, "team"),
        ({"justification": "  "}, "justification"),
        ({"kind": "forever"}, "kind"),
        ({"kind": "temporary"}, "ends_at"),
        ({"lines": []}, "lines"),
    ],
)
def test_bad_requests_are_400_naming_the_field(plan, lead_c, payload, field):
    response = as_user(lead_c).post("/api/v1/requests/", {**body(), **payload}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["extra"]["field"] == field


def test_malformed_json_is_400(plan, lead_c):
    response = as_user(lead_c).post(
        "/api/v1/requests/", "{not json", content_type="application/json"
    )
    assert response.status_code == 400
    assert set(response.json()) == {"message", "extra"}


def test_lead_sees_only_own_team_requests(plan, gpu, lead_a, lead_c, admin, submitted):
    other = new_request(lead_a, plan["team-a"], gpu, 6, 8)
    rows = as_user(lead_c).get("/api/v1/requests/").json()["results"]
    assert [r["id"] for r in rows] == [submitted["id"]]
    assert as_user(lead_c).get(f"/api/v1/requests/{other.pk}/").status_code == 404
    response = as_user(lead_c).post(f"/api/v1/requests/{other.pk}/withdraw/")
    assert response.status_code == 404
    every = as_user(admin).get("/api/v1/requests/").json()["results"]
    assert {r["id"] for r in every} == {submitted["id"], other.pk}
    filtered = as_user(admin).get("/api/v1/requests/?team=team-a&status=draft").json()
    assert [r["id"] for r in filtered["results"]] == [other.pk]


def test_auditor_reads_but_cannot_act(plan, auditor, submitted):
    api = as_user(auditor)
    assert api.get(f"/api/v1/requests/{submitted['id']}/").status_code == 200
    assert api.post(f"/api/v1/requests/{submitted['id']}/approve/").status_code == 403
    assert api.post("/api/v1/requests/", body(), format="json").status_code == 403


def test_anonymous_is_refused(plan, submitted):
    assert APIClient().get("/api/v1/requests/").status_code in (401, 403)
    assert APIClient().post(f"/api/v1/requests/{submitted['id']}/approve/").status_code in (
        401,
        403,
    )


def test_admin_approves_a_decided_amount(plan, admin, submitted):
    line_id = submitted["lines"][0]["id"]
    response = as_user(admin).post(
        f"/api/v1/requests/{submitted['id']}/approve/",
        {"comment": "5 is enough", "decisions": [{"line": line_id, "guarantee": "3", "cap": "5"}]},
        format="json",
    )
    assert response.status_code == 200, response.content
    decided = response.json()
    assert decided["status"] == "applying"
    assert decided["decided_by"] == "admin"
    assert [a["admin"] for a in decided["approvals"]] == ["admin"]
    line = decided["lines"][0]
    assert line["requested"]["cap"] == "6"
    assert line["decided"]["guarantee"] == "3"
    assert line["decided"]["cap"] == "5"
    allocation = Allocation.objects.get(team_namespace=plan["team-c"])
    assert (allocation.guarantee, allocation.cap) == (3, 5)


def test_self_approval_is_403(plan, admin, strict_policy):
    api = as_user(admin)
    created = api.post("/api/v1/requests/", body(), format="json").json()
    response = api.post(f"/api/v1/requests/{created['id']}/approve/")
    assert response.status_code == 403
    assert response.json() == {
        "message": "nobody approves their own request",
        "extra": {"field": "request"},
    }


def test_approving_twice_is_409(plan, admin, admin2, submitted):
    url = f"/api/v1/requests/{submitted['id']}/approve/"
    assert as_user(admin).post(url).status_code == 200
    response = as_user(admin2).post(url)
    assert response.status_code == 409
    assert response.json()["message"] == (
        f"request #{submitted['id']} is applying; it cannot become approved (only from: submitted)"
    )
    assert response.json()["extra"]["field"] == "status"


def test_decision_for_a_foreign_line_is_400(plan, admin, submitted):
    response = as_user(admin).post(
        f"/api/v1/requests/{submitted['id']}/approve/",
        {"decisions": [{"line": 999999, "guarantee": "1", "cap": "2"}]},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["extra"]["field"] == "decisions[0].line_id"


def test_reject_needs_a_comment(plan, admin, submitted):
    url = f"/api/v1/requests/{submitted['id']}/reject/"
    response = as_user(admin).post(url, {}, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "message": "say why the request is rejected (comment)",
        "extra": {"field": "comment"},
    }
    response = as_user(admin).post(url, {"comment": "use spot capacity"}, format="json")
    assert response.status_code == 200
    assert response.json()["status"] == "rejected"
    assert response.json()["decision_comment"] == "use spot capacity"


def test_changes_then_resubmit(plan, admin, lead_c, submitted):
    url = f"/api/v1/requests/{submitted['id']}"
    assert as_user(admin).post(f"{url}/changes/", {}, format="json").status_code == 400
    response = as_user(admin).post(f"{url}/changes/", {"comment": "cap 5"}, format="json")
    assert response.json()["status"] == "changes_requested"
    response = as_user(lead_c).post(f"{url}/submit/")
    assert response.status_code == 200
    assert response.json()["status"] == "submitted"


def test_withdraw(plan, lead_c, submitted):
    response = as_user(lead_c).post(f"/api/v1/requests/{submitted['id']}/withdraw/")
    assert response.status_code == 200
    assert response.json()["status"] == "withdrawn"
    again = as_user(lead_c).post(f"/api/v1/requests/{submitted['id']}/withdraw/")
    assert again.status_code == 409


@pytest.mark.parametrize(
    "payload",
    [
        [],
        "text",
        {"lines": "x"},
        {**body(), "lines": ["x"]},
        {**body(), "starts_at": "yesterday"},
        {**body(), "kind": "temporary", "ends_at": "2000-01-01T00:00:00Z"},
        {**body(), "team": ["team-c"]},
        {**body(per_pod_max="0")},
        {**body(guarantee="-1")},
        {**body(cap="1e30")},
        {**body(priority_classes="high")},
    ],
)
def test_user_input_never_gives_a_500(plan, lead_c, payload):
    response = as_user(lead_c).post("/api/v1/requests/", payload, format="json")
    assert response.status_code == 400, response.content
    assert set(response.json()) == {"message", "extra"}
    assert response.json()["message"]


def test_bad_decisions_are_400(plan, admin, submitted):
    url = f"/api/v1/requests/{submitted['id']}/approve/"
    for decisions in ("x", [{"line": "one", "guarantee": "1", "cap": "2"}], [{"line": 1}]):
        response = as_user(admin).post(url, {"decisions": decisions}, format="json")
        assert response.status_code == 400, response.content
        assert response.json()["extra"]["field"].startswith("decisions")


def test_wrong_method_is_405_in_the_same_shape(plan, admin, submitted):
    response = as_user(admin).get(f"/api/v1/requests/{submitted['id']}/approve/")
    assert response.status_code == 405
    assert response.json()["message"] == 'Method "GET" not allowed.'
