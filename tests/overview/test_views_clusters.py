"""The cluster overview (/clusters/, /clusters/<name>/) and the cross-cluster summary
(/summary/): capacity against the sums of guarantees and caps per team, over-commitment, rule
violations and syncs; a lead sees other teams only as one aggregate; fixed query counts."""

import html
import json
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from portal.models import WorkerHeartbeat
from quotas.models import (
    Allocation,
    Cluster,
    ClusterCapacity,
    SyncRequest,
    SyncRun,
    TeamMembership,
)
from tests.support.people import make_user
from tests.support.worlds import grow_world

pytestmark = pytest.mark.django_db

# Team t1's figures: no other team has them, so a lead of t0 must never see them.
T1_GUARANTEE, T1_CAP = Decimal(17), Decimal(51)  # a cap above 50% of 100: a violation


@pytest.fixture
def world(admin):
    world = grow_world(teams=3, clusters=1, requests_per_team=0, admin=admin)
    Allocation.objects.filter(team_namespace__name="t1-c0").update(
        guarantee=T1_GUARANTEE, cap=T1_CAP
    )
    return world


@pytest.fixture
def people(world, auditor, admin):
    users = {"admin": admin, "auditor": auditor}
    for name, team, role in (("lead-t0", 0, "lead"), ("member-t0", 0, "member")):
        users[name] = make_user(name)
        TeamMembership.objects.create(team=world["teams"][team], user=users[name], role=role)
    return users


def get(client, user, url):
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def chart_data(page: str) -> list[dict]:
    match = re.search(r'<script id="usage-chart-data" type="application/json">(.*?)</script>', page)
    assert match, "no chart data on the page"
    return json.loads(match.group(1))


def table_rows(page: str, testid: str) -> list[list[str]]:
    table = page.split(f'data-testid="{testid}"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)
    cell = r"<t[dh][^>]*>(.*?)</t[dh]>"
    return [
        [" ".join(re.sub(r"<[^>]+>", " ", c).split()) for c in re.findall(cell, r, re.S)]
        for r in rows
    ]


URLS = ["/clusters/", "/clusters/c0/", "/summary/"]


@pytest.mark.parametrize("url", URLS)
def test_anonymous_is_sent_to_login(client, url):
    response = client.get(url)
    assert response.status_code == 302 and response.url.startswith(reverse("login"))


def test_url_names():
    assert (reverse("clusters"), reverse("cluster-detail", args=["c0"]), reverse("summary")) == (
        "/clusters/",
        "/clusters/c0/",
        "/summary/",
    )


@pytest.mark.parametrize("persona", ["admin", "auditor", "lead-t0", "member-t0"])
def test_an_unknown_cluster_is_a_404(client, people, persona):
    client.force_login(people[persona])
    assert client.get(reverse("cluster-detail", args=["nope"])).status_code == 404


@pytest.mark.parametrize("persona", ["admin", "auditor"])
def test_admins_and_auditors_see_every_team_stacked(client, people, persona):
    page = get(client, people[persona], "/clusters/")
    rows = table_rows(page, "shares-c0-nvidiacomgpu")
    assert rows == [
        ["Team", "Guarantee", "Cap"],
        ["t0", "3", "6"],
        ["t1", "17", "51"],
        ["t2", "3", "6"],
        ["Total", "23", "63"],
    ]
    [chart] = chart_data(page)
    bars = [t for t in chart["figure"]["data"] if t["type"] == "bar"]
    assert [b["name"] for b in bars] == ["t0", "t1", "t2"]
    assert bars[1]["y"] == [17.0, 51.0]
    assert chart["figure"]["layout"]["barmode"] == "stack"
    assert chart["figure"]["layout"]["shapes"][0]["y0"] == 100.0  # the capacity line
    assert f'id="{chart["id"]}" role="img" aria-label="' in page
    # The details of syncs, drift and violations of every namespace.
    assert "boom c0" in page and 'data-testid="drift"' in page
    assert "cap 51 exceeds 50% of cluster c0" in page


@pytest.mark.parametrize("persona", ["lead-t0", "member-t0"])
@pytest.mark.parametrize("url", URLS)
def test_people_of_a_team_never_see_another_teams_name_or_figures(client, people, persona, url):
    page = get(client, people[persona], url)
    for secret in ("t1", "t2", "Team 1", "Team 2", "17", "51", "boom c0"):
        assert not re.search(rf"(?<![\w:.-]){re.escape(secret)}(?![\w:.-])", page), secret
    assert "Other teams" in page
    if url != "/summary/":
        for chart in chart_data(page):
            names = [t["name"] for t in chart["figure"]["data"]]
            assert names == ["t0", "Other teams"]
            assert chart["figure"]["data"][1]["y"] == [20.0, 57.0]  # t1 + t2 together


def test_a_lead_sees_capacity_totals_and_the_cluster_wide_violation(client, people):
    ClusterCapacity.objects.filter(cluster__name="c0").update(capacity=20)
    page = get(client, people["lead-t0"], "/clusters/c0/")
    capacity = table_rows(page, "capacity")
    assert capacity[1][:5] == ["A100 card nvidia.com/gpu", "20", "23 above capacity", "-3", "63"]
    assert 'data-testid="over-committed"' in page and 'data-testid="over-promised"' in page
    assert "guarantees on cluster c0 sum to 23 nvidia.com/gpu, above its capacity 20" in page
    assert 'data-testid="drift"' not in page and 'data-testid="open-syncs"' not in page


def test_the_detail_page_lists_drift_and_open_syncs_for_admins(client, people):
    page = get(client, people["auditor"], "/clusters/c0/")
    syncs = table_rows(page, "open-syncs")
    assert len(syncs) == 3 and "boom c0" in " ".join(syncs[1] + syncs[2])
    assert "spec.hard.requests.nvidia.com/gpu" in page


def test_workers_are_shown_to_platform_admins(client, people):
    from django.utils import timezone

    WorkerHeartbeat.objects.create(hostname="worker-7", last_seen=timezone.now())
    assert "worker-7" in get(client, people["admin"], "/clusters/")
    assert "worker-7" not in get(client, people["lead-t0"], "/clusters/")


def test_the_sync_table_shows_the_last_run_but_a_preview_and_the_backend_problems(client, people):
    cluster = Cluster.objects.get(name="c0")
    SyncRun.objects.filter(cluster=cluster).delete()
    SyncRequest.objects.filter(cluster=cluster).delete()
    assert table_rows(get(client, people["admin"], "/clusters/"), "clusters")[1][4] == "never"
    started = timezone.now() - timedelta(hours=2)
    run = SyncRun.objects.create(
        cluster=cluster,
        trigger=SyncRun.Trigger.RECONCILE,
        mode="enforce",
        status="succeeded",
        backend_problems=[{"backend": "kueue", "message": "kueue's v1beta2 API is not served"}],
    )
    SyncRun.objects.filter(pk=run.pk).update(started_at=started)
    # A later preview is neither the last sync nor where the problems are read from.
    SyncRun.objects.create(
        cluster=cluster, trigger=SyncRun.Trigger.PREVIEW, mode="enforce", status="failed"
    )
    page = get(client, people["admin"], "/clusters/")
    row = table_rows(page, "clusters")[1]
    when = timezone.localtime(started).strftime("%Y-%m-%d %H:%M")
    assert row[0] == "c0" and row[4] == f"succeeded {when}"
    assert row[5:8] == ["0", "0", "1"]  # pending, failed, drift of the last 7 days
    assert "kueue's v1beta2 API is not served" in html.unescape(page)
    assert 'data-testid="sync-c0" class="bad"' in page  # a backend problem is a bad row
    lead_page = get(client, people["lead-t0"], "/clusters/")
    assert "v1beta2" not in lead_page and "a scheduler is not served" in lead_page


def test_the_sync_figures_count_per_cluster_what_each_one_says(world):
    from quotas.kube.status import cluster_sync_status
    from quotas.models import DriftEvent

    c0 = Cluster.objects.get(name="c0")
    quiet = Cluster.objects.create(name="b-quiet")
    SyncRun.objects.all().delete()
    SyncRequest.objects.all().delete()
    DriftEvent.objects.all().delete()
    now = timezone.now()

    def run(minutes_ago, **fields):
        made = SyncRun.objects.create(cluster=c0, mode="enforce", **fields)
        SyncRun.objects.filter(pk=made.pk).update(started_at=now - timedelta(minutes=minutes_ago))

    problem = [{"backend": "volcano", "message": "not served"}]
    run(30, trigger=SyncRun.Trigger.RECONCILE, status="succeeded", backend_problems=problem)
    run(10, trigger=SyncRun.Trigger.RECONCILE, status=SyncRun.Status.RUNNING)
    run(1, trigger=SyncRun.Trigger.PREVIEW, status="failed", backend_problems=[{"x": 1}])

    def sync(minutes_ago, status, error=""):
        made = SyncRequest.objects.create(cluster=c0, status=status, last_error=error)
        SyncRequest.objects.filter(pk=made.pk).update(
            created_at=now - timedelta(minutes=minutes_ago)
        )

    sync(20, "failed", "older error")
    sync(5, "failed", "newest error")
    sync(3, "pending")
    sync(2, "pending")
    sync(1, "done")
    for days in (1, 6, 8):  # the last one is past the 7 days counted
        event = DriftEvent.objects.create(
            cluster=c0, api_version="v1", kind="ResourceQuota", name="q", changes=[]
        )
        DriftEvent.objects.filter(pk=event.pk).update(detected_at=now - timedelta(days=days))

    rows = cluster_sync_status()
    assert [row.cluster.name for row in rows] == ["b-quiet", "c0"]
    assert vars(rows[0]) == {
        "cluster": quiet,
        "last_run_status": None,
        "last_run_started_at": None,
        "pending": 0,
        "failed": 0,
        "drift_recent": 0,
        "last_error": "",
        "backend_problems": [],
    }
    c0_row = rows[1]
    # The last run is the one still running (the preview after it does not count); the
    # problems are the last finished run's.
    assert c0_row.last_run_status == SyncRun.Status.RUNNING
    assert c0_row.last_run_started_at == now - timedelta(minutes=10)
    assert c0_row.backend_problems == problem
    assert (c0_row.pending, c0_row.failed, c0_row.drift_recent) == (2, 2, 2)
    assert c0_row.last_error == "newest error"
    only = cluster_sync_status(clusters=Cluster.objects.filter(pk=quiet.pk))
    assert [row.cluster for row in only] == [quiet]


def test_summary_rows_columns_and_totals_for_admins(client, people, admin):
    grow_world(teams=3, clusters=2, requests_per_team=0, admin=admin)
    rows = table_rows(get(client, people["admin"], "/summary/"), "summary")
    body = {r[0]: r[1:] for r in rows[2:]}
    # columns: c0 gpu, c1 gpu, then the total over clusters
    assert body["Capacity"] == ["100", "100", "200"]  # all clusters: the capacities added
    assert body["t0 Team 0"] == ["3 / 6", "3 / 6", "6 / 12"]
    assert body["t1 Team 1"] == ["17 / 51", "3 / 6", "20 / 57"]
    assert body["Total"] == ["23 / 63", "9 / 18", "32 / 81"]
    assert "Other teams" not in body


def test_summary_for_a_lead_is_own_rows_others_and_total(client, people, admin):
    grow_world(teams=3, clusters=2, requests_per_team=0, admin=admin)
    rows = table_rows(get(client, people["lead-t0"], "/summary/"), "summary")
    body = {r[0]: r[1:] for r in rows[2:]}
    assert list(body) == ["Capacity", "t0 Team 0", "Other teams", "Total"]
    assert body["Other teams"] == ["20 / 57", "6 / 12", "26 / 69"]
    assert body["Total"] == ["23 / 63", "9 / 18", "32 / 81"]


def count_queries(client, url) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


@pytest.mark.parametrize("persona", ["admin", "auditor", "lead-t0"])
@pytest.mark.parametrize("url", URLS)
def test_queries_do_not_grow_with_teams_and_clusters(client, admin, people, persona, url):
    WorkerHeartbeat.objects.create(hostname="w1", last_seen="2026-01-01T00:00:00Z")
    client.force_login(people[persona])
    client.get(url)
    small = count_queries(client, url)
    grow_world(teams=8, clusters=4, requests_per_team=3, admin=admin)
    big = count_queries(client, url)
    assert Allocation.objects.count() == 32
    assert small == big
