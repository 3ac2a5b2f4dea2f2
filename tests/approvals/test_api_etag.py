"""Safe updates: ETag on a request, If-Match on revise and on the decisions (fresh: 200,
stale: 412 naming what changed, absent: 200 as before)."""

import pytest

from approvals.models import QuotaRequest
from tests.support.api import as_user, body

pytestmark = pytest.mark.django_db


@pytest.fixture
def submitted(plan, lead_c, strict_policy):
    return as_user(lead_c).post("/api/v1/requests/", body(), format="json").json()


def etag(client, pk: int) -> str:
    response = client.get(f"/api/v1/requests/{pk}/")
    assert response.status_code == 200
    return response["ETag"]


def test_etag_changes_with_every_change(submitted, admin, admin2):
    client = as_user(admin)
    first = etag(client, submitted["id"])
    assert first.startswith('"request-') and first == etag(client, submitted["id"])
    approved = client.post(f"/api/v1/requests/{submitted['id']}/approve/", {}, format="json")
    assert approved.status_code == 200
    assert approved["ETag"] != first
    assert approved["ETag"] == etag(client, submitted["id"])


def test_approve_with_a_fresh_tag(submitted, admin):
    client = as_user(admin)
    tag = etag(client, submitted["id"])
    response = client.post(
        f"/api/v1/requests/{submitted['id']}/approve/", {}, format="json", HTTP_IF_MATCH=tag
    )
    assert response.status_code == 200
    assert response.json()["status"] in ("approved", "applying")


def test_a_stale_tag_is_a_412_naming_what_changed(submitted, admin, lead_c):
    admin_client, lead = as_user(admin), as_user(lead_c)
    tag = etag(admin_client, submitted["id"])
    lead.post(f"/api/v1/requests/{submitted['id']}/withdraw/", {}, format="json")
    for action, data in (
        ("approve", {}),
        ("reject", {"comment": "no"}),
        ("changes", {"comment": "x"}),
    ):
        response = admin_client.post(
            f"/api/v1/requests/{submitted['id']}/{action}/", data, format="json", HTTP_IF_MATCH=tag
        )
        assert response.status_code == 412, action
        error = response.json()
        assert set(error) == {"message", "extra"}
        assert "request.withdrawn by lead-c" in error["message"]
        assert error["extra"]["code"] == "stale"
        assert error["extra"]["field"] == "If-Match"
        assert error["extra"]["etag"] == etag(admin_client, submitted["id"])
        assert [c["action"] for c in error["extra"]["changes"]] == ["request.withdrawn"]
    assert QuotaRequest.objects.get(pk=submitted["id"]).status == "withdrawn"


def test_no_if_match_works_as_before(submitted, admin):
    response = as_user(admin).post(
        f"/api/v1/requests/{submitted['id']}/reject/", {"comment": "not now"}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["status"] == "rejected"


def test_a_tag_of_something_else_and_the_star(submitted, admin):
    client = as_user(admin)
    url = f"/api/v1/requests/{submitted['id']}/changes/"
    wrong = client.post(url, {"comment": "x"}, format="json", HTTP_IF_MATCH='"nonsense"')
    assert wrong.status_code == 412
    assert "is not a tag of request" in wrong.json()["message"]
    star = client.post(url, {"comment": "x"}, format="json", HTTP_IF_MATCH="*")
    assert star.status_code == 200


def test_revise_honours_if_match(plan, lead_c, strict_policy):
    client = as_user(lead_c)
    draft = client.post("/api/v1/requests/", body(submit=False), format="json").json()
    url = f"/api/v1/requests/{draft['id']}/"
    tag = etag(client, draft["id"])
    lines = {"lines": body("2", "5")["lines"]}
    fresh = client.patch(url, lines, format="json", HTTP_IF_MATCH=tag)
    assert fresh.status_code == 200
    assert fresh["ETag"] != tag
    stale = client.patch(url, {"lines": body("1", "5")["lines"]}, format="json", HTTP_IF_MATCH=tag)
    assert stale.status_code == 412
    assert "request.revised by lead-c" in stale.json()["message"]
    assert QuotaRequest.objects.get(pk=draft["id"]).lines.get().requested_guarantee == 2
    absent = client.patch(url, {"lines": body("1", "5")["lines"]}, format="json")
    assert absent.status_code == 200
