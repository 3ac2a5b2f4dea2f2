"""Showback: per team and month the GPU-hours used, guaranteed, borrowed and left idle over
every cluster (a MIG slice by its share of a card), with their cost where a cluster has a
GPU-hour price — in the page (table and charts), the CSV and the API, each team seen only by
those who may see it, and a bad filter refused naming it."""

import csv
import html
import io
from datetime import date, timedelta
from decimal import Decimal as D

import orjson
import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from quotas.models import Cluster, Resource, TeamNamespace
from tests.support.api import as_user
from tests.support.charts import checked
from usage.charts import showback_figures
from usage.models import UsageDaily
from usage.showback import EXPORT_COLUMNS, ShowbackPeriod, add_months, showback

pytestmark = pytest.mark.django_db

JUNE, JULY = date(2026, 6, 1), date(2026, 7, 1)


def _day(ns, resource, day, *, used, borrowed=0, idle=0):
    return UsageDaily.objects.create(
        team_namespace=ns,
        resource=resource,
        day=day,
        source="cluster",
        samples=288,
        peak=D(used) / 24,
        p95=D(used) / 24,
        mean=D(used) / 24,
        gpu_hours=D(used),
        borrowed_gpu_hours=D(borrowed),
        idle_guaranteed_gpu_hours=D(idle),
    )


@pytest.fixture
def world(plan, cluster, gpu, team_a):
    """demo (1.20 a GPU-hour): team-a two June days of 120 GPU-hours, 24 of them borrowed;
    cloud (2.50, MIG 3g.40gb = half an A100): team-a one June day of 48 slice-hours with 24
    idle; team-b a July day on demo of 48 with 48 idle; team-c's vGPU cores are no GPUs."""
    Cluster.objects.filter(pk=cluster.pk).update(gpu_hour_price=D("1.20"))
    cloud = Cluster.objects.create(name="cloud", gpu_hour_price=D("2.50"))
    slice_3g = Resource.objects.create(
        name="nvidia.com/mig-3g.40gb",
        display_name="MIG 3g.40gb",
        kind=Resource.Kind.MIG,
        unit="slice",
        gpu_model="A100 80GB",
    )
    vgpu = Resource.objects.create(
        name="nvidia.com/gpucores",
        display_name="vGPU cores",
        kind=Resource.Kind.VGPU_CORES,
        unit="%",
    )
    a_cloud = TeamNamespace.objects.create(team=team_a, cluster=cloud, name="team-a-cloud")
    for i in range(2):
        _day(plan["team-a"], gpu, JUNE + timedelta(days=i), used=120, borrowed=24)
    _day(a_cloud, slice_3g, JUNE + timedelta(days=9), used=48, idle=24)
    _day(plan["team-b"], gpu, JULY + timedelta(days=3), used=48, idle=48)
    _day(plan["team-c"], vgpu, JUNE, used=500)
    return {"cloud": cloud, "slice": slice_3g}


def _rows(result) -> dict:
    return {(f"{r.month:%Y-%m}", r.team or r.scope): r for r in result.rows}


def test_an_admin_sees_every_team_per_month_in_gpu_hours_and_cost(world, admin):
    result = showback(user=admin, period=ShowbackPeriod(start=JUNE, end=JULY))
    rows = _rows(result)
    assert list(rows) == [
        ("2026-06", "team-a"),
        ("2026-06", "total"),
        ("2026-07", "team-b"),
        ("2026-07", "total"),
    ]
    a = rows[("2026-06", "team-a")]
    # 2 × 120 on demo + 48 half-GPU slice-hours on cloud = 264 GPU-hours; 48 borrowed; 12 idle.
    assert (a.used, a.borrowed, a.idle, a.guaranteed) == (
        D("264.0"),
        D("48.0"),
        D("12.0"),
        D("228.0"),
    )
    # 240 × 1.20 + 24 × 2.50; the guarantee: 192 × 1.20 + 36 × 2.50; idle 12 × 2.50.
    assert (a.used_cost, a.guaranteed_cost, a.idle_cost) == (D("348.00"), D("320.40"), D("30.00"))
    assert a.idle_percent == 5
    b = rows[("2026-07", "team-b")]
    assert (b.used, b.guaranteed, b.idle, b.idle_percent) == (D(48), D(96), D(48), 50)
    assert rows[("2026-06", "total")].used == D(264)  # the vGPU shares are not GPU-hours
    assert result.currency == "USD" and result.priced


def test_a_lead_sees_the_own_team_the_others_together_and_the_total(world, lead_a):
    rows = _rows(showback(user=lead_a, period=ShowbackPeriod(start=JUNE, end=JULY)))
    assert list(rows) == [
        ("2026-06", "team-a"),
        ("2026-06", "total"),
        ("2026-07", "others"),
        ("2026-07", "total"),
    ]
    assert rows[("2026-07", "others")].used == D(48)


def test_one_cluster_counts_only_its_hours_and_a_cluster_without_price_no_cost(world, admin):
    period = ShowbackPeriod(start=JUNE, end=JUNE, cluster=world["cloud"])
    a = _rows(showback(user=admin, period=period))[("2026-06", "team-a")]
    assert (a.used, a.guaranteed, a.used_cost) == (D(24), D(36), D("60.00"))
    Cluster.objects.update(gpu_hour_price=None)
    a = _rows(showback(user=admin, period=ShowbackPeriod(start=JUNE, end=JUNE)))[
        ("2026-06", "team-a")
    ]
    assert a.used_cost is None and a.idle_cost is None and a.unpriced == D(264)


def test_the_charts_stack_each_teams_use_and_compare_guarantee_and_use(world, admin):
    period = ShowbackPeriod(start=JUNE, end=JULY)
    result = showback(user=admin, period=period)
    figures = showback_figures(months=period.months, rows=result.rows, colours={})
    # Numbers, not Decimals: plotly writes such a figure at once, without a walk to convert it.
    assert all(orjson.dumps(f) for f in figures)
    stacked, grouped = (checked(f) for f in figures)
    by_team = {t["name"]: t["y"] for t in stacked["data"]}
    assert by_team == {"team-a": [264, 0], "team-b": [0, 48]}
    assert stacked["layout"]["barmode"] == "stack"
    by_meaning = {t["name"]: t["y"] for t in grouped["data"]}
    assert by_meaning["guaranteed"] == [228, 96] and by_meaning["guaranteed but idle"] == [12, 48]


def test_the_page_shows_the_table_costs_and_charts(client, world, lead_a):
    client.force_login(lead_a)
    response = client.get("/showback/", {"start": "2026-06", "end": "2026-07"})
    assert response.status_code == 200
    page = response.content.decode()
    assert 'data-testid="showback-2026-06-team-a"' in page
    assert 'data-testid="showback-2026-07-others"' in page
    assert "team-b" not in page.split('id="s-team"')[1].split("</select>")[0]
    assert "348.00 USD" in page and "showback-chart-1" in page
    assert "/showback/export.csv?start=2026-06&amp;end=2026-07" in page


def test_the_default_period_is_the_last_six_months(client, plan, gpu, admin):
    this_month = timezone.localdate().replace(day=1)
    _day(plan["team-a"], gpu, this_month, used=10)
    _day(plan["team-a"], gpu, add_months(this_month, -6), used=99)  # just before
    result = APIClient()
    result.force_authenticate(admin)
    data = result.get("/api/v1/showback/").json()
    assert data["start"] == f"{add_months(this_month, -5):%Y-%m}"
    assert data["end"] == f"{this_month:%Y-%m}"
    assert len([r for r in data["rows"] if r["scope"] == "total"]) == 6
    team_rows = [r for r in data["rows"] if r["scope"] == "team"]
    assert [(r["team"], r["gpu_hours_used"]) for r in team_rows] == [("team-a", "10")]


def _csv(response) -> list[dict]:
    assert response.status_code == 200, response.content
    reader = csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode()))
    assert tuple(reader.fieldnames) == EXPORT_COLUMNS
    return list(reader)


def test_the_csv_has_the_pages_rows(client, world, lead_a):
    client.force_login(lead_a)
    response = client.get("/showback/export.csv", {"start": "2026-06", "end": "2026-07"})
    assert 'filename="showback-202606-202607.csv"' in response["Content-Disposition"]
    rows = _csv(response)
    assert [(r["month"], r["scope"], r["team"]) for r in rows] == [
        ("2026-06", "team", "team-a"),
        ("2026-06", "total", ""),
        ("2026-07", "others", ""),
        ("2026-07", "total", ""),
    ]
    assert rows[0]["gpu_hours_used"] == "264.0" and rows[0]["cost_used"] == "348.00"
    assert rows[0]["currency"] == "USD" and rows[0]["idle_percent"] == "5"


def test_the_api_answers_the_same_rows(world, lead_a):
    response = as_user(lead_a).get("/api/v1/showback/?start=2026-06&end=2026-07&cluster=demo")
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["currency"] == "USD" and data["cluster"] == "demo"
    first = data["rows"][0]
    assert first == {
        "month": "2026-06",
        "scope": "team",
        "team": "team-a",
        "gpu_hours_used": "240",
        "gpu_hours_guaranteed": "192",
        "gpu_hours_borrowed": "48",
        "gpu_hours_idle": "0",
        "idle_percent": 0,
        "gpu_hours_unpriced": "0",
        "cost_used": "288.00",
        "cost_guaranteed": "230.40",
        "cost_idle": "0.00",
    }


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"start": "2026-13"}, "start: give a month as YYYY-MM, got '2026-13'"),
        ({"start": " "}, "start: give a month as YYYY-MM, got ' '"),
        ({"start": "2026-07", "end": "2026-06"}, "end: must not be before start"),
        ({"start": "2024-01", "end": "2026-01"}, "end: a period is at most 24 months"),
        ({"cluster": "nowhere"}, "cluster: no cluster named 'nowhere'"),
        ({"team": "team-b"}, "team: no team 'team-b' among the teams you may see"),
    ],
)
def test_a_bad_filter_is_refused_naming_it(client, world, lead_a, params, message):
    client.force_login(lead_a)
    page = client.get("/showback/", params)
    assert page.status_code == 400 and message in html.unescape(page.content.decode())
    assert 'data-testid="filter-error"' in page.content.decode()
    export = client.get("/showback/export.csv", params)
    assert export.status_code == 400 and message in export.content.decode()
    api = as_user(lead_a).get("/api/v1/showback/", params)
    assert api.status_code == 400 and message in str(api.json())


def test_nobody_signed_out_reads_it(client, world):
    assert client.get("/showback/").status_code == 302
    assert client.get("/showback/export.csv").status_code == 302
    assert APIClient().get("/api/v1/showback/").status_code == 401


def test_the_schema_describes_the_endpoint(client):
    schema = client.get("/api/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/showback/"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {"start", "end", "cluster", "team"}
    assert {"200", "400", "401"} <= set(operation["responses"])
