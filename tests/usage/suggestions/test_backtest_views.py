"""How suggestions did, where people read it: the panels of /suggestions/ and
GET /api/v1/suggestions/backtest/, through one selector (a cluster's backtest to whoever sees
its suggestions: a namespace of their teams on it; admins and auditors every cluster)."""

import re
from datetime import date

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from quotas.models import Cluster, ClusterCapacity, Team, TeamMembership, TeamNamespace
from tests.support.api import as_user
from tests.support.people import make_user
from tests.support.usage import JULY, JUNE, MAY, flat, hourly_samples
from tests.support.visible_text import english_runs, visible_texts
from usage.backtest import backtest_compute
from usage.models import SuggestionBacktest

pytestmark = pytest.mark.django_db
ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9"}
POLICY_ORDER = ["suggested", "equal_split", "seed_rule", "hindsight"]


@pytest.fixture
def backtests(cluster, backtest_months, gpu, team_b):
    """June backtested on demo (team-a and team-b), and on a cluster "other" where only team-b
    has a namespace."""
    backtest_compute(cluster=cluster, month=JUNE)
    other = Cluster.objects.create(name="other")
    ClusterCapacity.objects.create(cluster=other, resource=gpu, capacity=8)
    ns = TeamNamespace.objects.create(team=team_b, cluster=other, name="team-b-batch")
    hourly_samples(ns, gpu, MAY, JULY, flat(2))
    backtest_compute(cluster=other, month=JUNE)
    return {"demo": cluster, "other": other}


@pytest.fixture
def lead_c(db):
    """A lead of a team with no namespace anywhere."""
    team = Team.objects.create(slug="team-c", name="Team C")
    user = make_user("lead-c")
    TeamMembership.objects.create(team=team, user=user, role=TeamMembership.Role.LEAD)
    return user


def _panel(html: str, cluster: str) -> str:
    found = re.search(
        rf'<section class="card" data-testid="backtest-{cluster}">.*?</section>', html, re.S
    )
    return found[0] if found else ""


def test_a_lead_sees_the_panel_of_the_clusters_of_their_teams_only(client, backtests, lead_a):
    client.force_login(lead_a)
    html = client.get("/suggestions/").content.decode()
    panel = _panel(html, "demo")
    assert panel and not _panel(html, "other")
    assert "How suggestions did on demo" in panel
    for name in ("this method", "equal split", "seed&#x27;s rule", "best in hindsight"):
        assert name in panel
    assert "Idle guaranteed GPU-hours" in panel and "Demand blocked by caps" in panel
    row = re.search(r'data-testid="backtest-2025-06-suggested">(.*?)</tr>', panel, re.S)[1]
    # Nothing idle, 60% of the demand covered (2,160 of 3,600 GPU-hours), nothing blocked,
    # the bursty inference namespace's borrowing priced at 2.
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
    assert cells == ["0 (0%)", "2160 (60%)", "0 (0%)", "2880"]
    assert "team-b-inference" not in panel  # other teams only inside the cluster's totals


def test_admins_see_every_cluster_and_the_cluster_filter_picks_one(client, backtests, admin):
    client.force_login(admin)
    html = client.get("/suggestions/").content.decode()
    assert _panel(html, "demo") and _panel(html, "other")
    html = client.get("/suggestions/?cluster=other").content.decode()
    assert _panel(html, "other") and not _panel(html, "demo")


def test_a_lead_of_another_team_sees_no_cluster_they_have_no_namespace_on(
    client, backtests, lead_c, other_team_lead
):
    client.force_login(lead_c)
    html = client.get("/suggestions/").content.decode()
    assert not _panel(html, "demo") and not _panel(html, "other")
    assert 'data-testid="backtest-none"' in html
    client.force_login(other_team_lead)  # team-b: a namespace on both
    html = client.get("/suggestions/").content.decode()
    assert _panel(html, "demo") and _panel(html, "other")


def test_the_months_shown_are_the_last_six_and_together(client, cluster, backtests, admin):
    # Seven months more before June, as the monthly job would have stored them.
    june = list(SuggestionBacktest.objects.filter(cluster=cluster))
    earlier = [date(2024, 11, 1), date(2024, 12, 1)] + [date(2025, m, 1) for m in range(1, 6)]
    for month in earlier:
        SuggestionBacktest.objects.bulk_create([replace_month(row, month) for row in june])
    client.force_login(admin)
    html = client.get("/suggestions/?cluster=demo").content.decode()
    shown = re.findall(r'data-testid="backtest-month-([0-9-]+)"', html)
    assert shown == ["2025-06", "2025-05", "2025-04", "2025-03", "2025-02", "2025-01"]
    assert "the last 6 months together" in html
    row = re.search(r'data-testid="backtest-together-suggested">(.*?)</tr>', html, re.S)[1]
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
    assert cells == ["0 (0%)", f"{6 * 2160} (60%)", "0 (0%)", f"{6 * 2880}"]


def replace_month(row: SuggestionBacktest, month: date) -> SuggestionBacktest:
    row.pk = None
    row.month = month
    return SuggestionBacktest(**{f.attname: getattr(row, f.attname) for f in row._meta.fields})


def test_the_panel_reads_a_fixed_number_of_queries(client, cluster, backtests, admin, gpu):
    client.force_login(admin)

    def queries() -> int:
        with CaptureQueriesContext(connection) as seen:
            assert client.get("/suggestions/").status_code == 200
        return len(seen.captured_queries)

    before = queries()
    third = Cluster.objects.create(name="third")
    ClusterCapacity.objects.create(cluster=third, resource=gpu, capacity=4)
    ns = TeamNamespace.objects.create(team=Team.objects.get(slug="team-a"), cluster=third, name="x")
    hourly_samples(ns, gpu, MAY, JULY, flat(1))
    backtest_compute(cluster=third, month=JUNE)
    html = client.get("/suggestions/").content.decode()
    assert _panel(html, "third")
    assert queries() == before


def test_the_panel_in_chinese_has_no_english(client, backtests, lead_a):
    client.force_login(lead_a)
    html = client.get("/suggestions/", **ZH).content.decode()
    panel = _panel(html, "demo")
    assert panel and "建议" in panel
    names = {"demo", "nvidia.com/gpu", "team-a-training", "team-b-inference"}
    assert english_runs(visible_texts(panel), names=names) == []
    client.force_login(make_user("nobody"))
    html = client.get("/suggestions/", **ZH).content.decode()
    empty = re.search(
        r'<section class="card" data-testid="backtest-none">.*?</section>', html, re.S
    )
    assert english_runs(visible_texts(empty[0])) == []


# --- the API ----------------------------------------------------------------------------------


def test_the_api_answers_the_same_rows_as_the_page(backtests, lead_a, admin):
    body = as_user(lead_a).get("/api/v1/suggestions/backtest/").json()
    rows = body["results"]
    assert body["count"] == 4 and {r["cluster"] for r in rows} == {"demo"}
    assert [r["policy"] for r in rows] == POLICY_ORDER
    suggested = rows[0]
    assert suggested == {
        "cluster": "demo",
        "resource": "nvidia.com/gpu",
        "month": "2025-06",
        "policy": "suggested",
        "namespaces": 2,
        "demand": "3600",
        "covered": "2160",
        "covered_percent": "60",
        "borrowed": "1440",
        "blocked": "0",
        "blocked_percent": "0",
        "idle": "0",
        "guaranteed": "2160",
        "idle_percent": "0",
        "cost": "2880",
        "prices": {"idle": "1", "borrowed": "0.5", "inference_borrowed": "2", "blocked": "4"},
        "computed_at": suggested["computed_at"],
    }
    # A cluster the lead has no namespace on: nothing, as for suggestions of other teams.
    assert as_user(lead_a).get("/api/v1/suggestions/backtest/?cluster=other").json()["count"] == 0
    admin_rows = as_user(admin).get("/api/v1/suggestions/backtest/").json()["results"]
    assert {r["cluster"] for r in admin_rows} == {"demo", "other"}
    hindsight = (
        as_user(admin)
        .get(
            "/api/v1/suggestions/backtest/?cluster=other&policy=hindsight&month=2025-06"
            "&resource=nvidia.com/gpu"
        )
        .json()["results"]
    )
    assert [(r["cluster"], r["policy"], r["idle"]) for r in hindsight] == [
        ("other", "hindsight", "0")
    ]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("cluster=nope", "cluster"),
        ("resource=nope", "resource"),
        ("month=2025-13", "month"),
        ("policy=best", "policy"),
    ],
)
def test_a_bad_filter_is_a_400_naming_it(backtests, admin, query, field):
    response = as_user(admin).get(f"/api/v1/suggestions/backtest/?{query}")
    assert response.status_code == 400
    body = response.json()
    assert body["extra"]["field"] == field and body["message"].startswith(f"{field}:")
