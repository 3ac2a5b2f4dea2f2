"""/api/v1/suggestions/ and /api/v1/usage/canary/: scoped by the same selector as the pages,
filters by cluster, team and month, invalid values refused naming the parameter."""

import pytest

from tests.support.api import as_user

pytestmark = pytest.mark.django_db


def test_a_lead_sees_the_suggestions_of_their_team_only(june_suggestions, lead_a, admin):
    rows = as_user(lead_a).get("/api/v1/suggestions/").json()["results"]
    assert [(r["team"], r["namespace"]) for r in rows] == [("team-a", "team-a-training")]
    [row] = rows
    assert row["current"] == {"guarantee": "6", "cap": "10"}
    assert row["suggested"] == {"guarantee": "2", "cap": "4"}
    assert row["month"] == "2025-06" and row["cluster"] == "demo"
    assert "idle_guarantee" in row["flags"] and row["figures"]["days_of_data"] == 30
    other = june_suggestions["team-b-inference"].pk
    assert as_user(lead_a).get(f"/api/v1/suggestions/{other}/").status_code == 404
    assert len(as_user(admin).get("/api/v1/suggestions/").json()["results"]) == 2


def test_filters(june_suggestions, admin):
    api = as_user(admin)

    def names(query):
        response = api.get(f"/api/v1/suggestions/?{query}")
        assert response.status_code == 200, response.content
        return [r["namespace"] for r in response.json()["results"]]

    assert names("team=team-b") == ["team-b-inference"]
    assert names("cluster=demo&month=2025-06") == ["team-a-training", "team-b-inference"]
    assert names("month=2025-05") == []


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("month=2025-13", "month"),
        ("month=june", "month"),
        ("cluster=nope", "cluster"),
        ("team=nope", "team"),
    ],
)
def test_an_invalid_filter_is_a_400_naming_the_parameter(june_suggestions, admin, query, field):
    response = as_user(admin).get(f"/api/v1/suggestions/?{query}")
    assert response.status_code == 400
    body = response.json()
    assert body["extra"]["field"] == field and body["message"].startswith(f"{field}:")


def test_a_team_the_lead_may_not_see_is_refused_like_an_unknown_one(june_suggestions, lead_a):
    response = as_user(lead_a).get("/api/v1/suggestions/?team=team-b")
    assert response.status_code == 400
    assert response.json()["message"] == "team: no team 'team-b' among the teams you may see"


def test_canary_metrics(june_usage, lead_a, admin):
    url = "/api/v1/usage/canary/?cluster=demo&start=2025-06-01&end=2025-06-30"
    body = as_user(admin).get(url).json()
    rows = {r["team"]: r for r in body["teams"]}
    assert set(rows) == {"team-a", "team-b", None}
    a = rows["team-a"]
    assert a["days"] == 30 and a["gpu_utilization_mean"] == "40"
    assert a["gpu_hours"] == "1440"  # mean 2 x 24 h x 30 days
    assert rows["team-b"]["queue_wait_max_seconds"] == 120
    assert rows[None]["gpu_hours"] == "5760"  # 1440 + 6 x 24 x 30
    # A lead sees their own team, and a total of what they may see.
    lead_rows = as_user(lead_a).get(url).json()["teams"]
    assert [r["team"] for r in lead_rows] == ["team-a", None]
    assert lead_rows[1]["gpu_hours"] == "1440"
    only_b = as_user(admin).get(url + "&team=team-b").json()["teams"]
    assert [r["team"] for r in only_b] == ["team-b", None]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("start=2025-06-01&end=2025-06-30", "cluster"),
        ("cluster=nope&start=2025-06-01&end=2025-06-30", "cluster"),
        ("cluster=demo&start=June&end=2025-06-30", "start"),
        ("cluster=demo&start=2025-06-01", "end"),
        ("cluster=demo&start=2025-06-30&end=2025-06-01", "end"),
        ("cluster=demo&team=team-b&start=2025-06-01&end=2025-06-30", "team"),
    ],
)
def test_canary_refuses_bad_parameters(june_usage, lead_a, query, field):
    response = as_user(lead_a).get(f"/api/v1/usage/canary/?{query}")
    assert response.status_code == 400, response.content
    assert response.json()["extra"]["field"] == field
