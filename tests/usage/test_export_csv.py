"""/usage/export.csv: the usage page's daily rollups as CSV, with the page's filters and the
same teams as the page; a bad filter is a 400 naming it."""

import csv
import io
from datetime import date, timedelta

import pytest

from tests.support.usage import rollup
from usage.views import EXPORT_COLUMNS

pytestmark = pytest.mark.django_db

DAY = date(2025, 6, 10)


@pytest.fixture
def days(plan, gpu):
    for i in range(3):
        rollup(plan["team-a"], gpu, DAY + timedelta(i), peak=3 + i, mean=2, util=40)
        rollup(plan["team-b"], gpu, DAY + timedelta(i), peak=5)
    return plan


def _rows(response) -> list[dict]:
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    text = b"".join(response.streaming_content).decode()
    reader = csv.DictReader(io.StringIO(text))
    assert tuple(reader.fieldnames) == EXPORT_COLUMNS
    return list(reader)


def _export(client, **params):
    query = {"cluster": "demo", "start": "2025-06-01", "end": "2025-06-30", **params}
    return client.get("/usage/export.csv", query)


def test_a_lead_exports_the_own_teams_days_only(client, days, lead_a):
    client.force_login(lead_a)
    response = _export(client)
    assert 'filename="usage-demo-20250601-20250630.csv"' in response["Content-Disposition"]
    rows = _rows(response)
    assert {r["team"] for r in rows} == {"team-a"}
    assert [(r["day"], r["peak"], r["mean"], r["utilization_mean"]) for r in rows] == [
        ("2025-06-10", "3.000", "2.000", "40.00"),
        ("2025-06-11", "4.000", "2.000", "40.00"),
        ("2025-06-12", "5.000", "2.000", "40.00"),
    ]
    assert rows[0]["gpu_hours"] == "48.000" and rows[0]["pending_wait_seconds"] == ""


def test_an_admin_exports_every_team_or_one(client, days, admin):
    client.force_login(admin)
    assert {r["team"] for r in _rows(_export(client))} == {"team-a", "team-b"}
    rows = _rows(_export(client, team="team-b", start="2025-06-11"))
    assert [(r["team"], r["day"]) for r in rows] == [
        ("team-b", "2025-06-11"),
        ("team-b", "2025-06-12"),
    ]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"team": "team-b"}, "team: no team 'team-b' among the teams you may see"),
        ({"cluster": "nowhere"}, "cluster: no cluster named 'nowhere'"),
        ({"start": "10/06/2025"}, "start"),
    ],
)
def test_a_bad_filter_is_a_400_naming_it(client, days, lead_a, params, message):
    client.force_login(lead_a)
    response = _export(client, **params)
    assert response.status_code == 400
    assert message in response.content.decode()


def test_anonymous_is_sent_to_the_login(client, days):
    response = _export(client)
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_the_usage_page_links_to_the_export_with_its_filters(client, days, lead_a):
    client.force_login(lead_a)
    page = client.get("/usage/", {"cluster": "demo", "start": "2025-06-01", "end": "2025-06-30"})
    html = page.content.decode()
    assert (
        'href="/usage/export.csv?cluster=demo&amp;team=&amp;start=2025-06-01&amp;end=2025-06-30"'
        in html
    )
