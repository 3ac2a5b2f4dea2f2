"""Who may ask what waits in a namespace (the page and the API), what an unreachable
cluster or a cluster without the schedulers' kinds gives, and the dashboard's link. What the
reasons are, on a real cluster: tests/real/test_waiting.py."""

from __future__ import annotations

import pytest
from django.test import Client

from quotas.models import Cluster

pytestmark = pytest.mark.django_db


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def on_sandbox(ns_a, alloc_a, kube_sandbox):
    Cluster.objects.filter(pk=ns_a.cluster_id).update(sandbox_url=kube_sandbox.url)
    return ns_a


def test_the_team_admins_and_auditors_may_ask_and_nobody_else(
    on_sandbox, lead_a, member_a, other_team_lead, admin, auditor
):
    url = f"/api/v1/namespaces/{on_sandbox.pk}/waiting/"
    for user in (lead_a, member_a, admin, auditor):
        answer = client_of(user).get(url)
        assert answer.status_code == 200, (user, answer.content)
        body = answer.json()
        assert (body["cluster"], body["namespace"], body["team"]) == (
            "demo",
            "team-a-training",
            "team-a",
        )
        # The test server has the namespace's pods and nothing that waits; Jobs and events
        # it does not serve are read as none.
        assert body["error"] == "" and body["waiting"] == []
    refused = client_of(other_team_lead).get(url)
    assert refused.status_code == 404
    assert "not visible to you" in refused.json()["message"]
    assert Client().get(url).status_code in (401, 403)
    assert client_of(lead_a).get("/api/v1/namespaces/999999/waiting/").status_code == 404


def test_the_page_and_its_list_for_the_dashboard(on_sandbox, lead_a, other_team_lead):
    page = client_of(lead_a).get("/waiting/team-a/")
    assert page.status_code == 200
    assert b'data-testid="waiting-demo-team-a-training"' in page.content
    assert "Nothing waits here." in page.content.decode()
    part = client_of(lead_a).get("/waiting/team-a/?part=list")
    assert part.status_code == 200 and b"<html" not in part.content
    assert b"data-waiting-list" in part.content
    assert client_of(other_team_lead).get("/waiting/team-a/").status_code == 404
    assert Client().get("/waiting/team-a/").status_code == 302  # to the login
    dashboard = client_of(lead_a).get("/").content.decode()
    assert 'data-waiting-url="/waiting/team-a/?part=list"' in dashboard


def test_an_unreachable_cluster_is_said_on_the_page_not_raised(ns_a, alloc_a, lead_a):
    Cluster.objects.filter(pk=ns_a.cluster_id).update(sandbox_url="http://127.0.0.1:9")
    page = client_of(lead_a).get("/waiting/team-a/")
    assert page.status_code == 200
    assert "The cluster could not be read" in page.content.decode()
    answer = client_of(lead_a).get(f"/api/v1/namespaces/{ns_a.pk}/waiting/").json()
    assert answer["error"] == "the cluster did not answer" and answer["waiting"] == []
