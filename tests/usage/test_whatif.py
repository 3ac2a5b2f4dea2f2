"""The what-if: a month of stored samples replayed against other values, beside the values in
force then (usage/whatif.py); on the request page and in the API's preview."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.test import Client

from approvals.whatif import lines_what_if
from quotas.models import AllocationVersion
from quotas.services import allocation_set
from tests.support.api import as_user
from tests.support.requests import line_data, new_request
from tests.support.usage import june_suggestions_create, june_usage_create
from usage.models import UsageDaily, UsageSample
from usage.rollup import usage_rollup
from usage.whatif import Point, replay, what_ifs

NOW = datetime(2026, 6, 15, 12, tzinfo=UTC)
D = Decimal


def test_a_replay_counts_blocked_borrowed_idle_and_covered_hours():
    hour = D(3600)
    points = [(Point(hour, D(d)), D(4), D(8)) for d in (0, 2, 6, 10)]
    r = replay(points)
    # runs 0, 2, 6, 8 (the cap); 2 blocked; 2 + 4 above the guarantee; 4 + 2 of it idle.
    assert (r.demand, r.covered, r.blocked, r.borrowed, r.idle, r.guaranteed) == (
        18,
        10,
        2,
        6,
        6,
        16,
    )
    assert r.covered_share == D(10) / D(18)
    assert r.idle_share == D(6) / D(16)


def test_a_replay_without_demand_or_guarantee_has_no_shares():
    r = replay([(Point(D(300), D(0)), D(0), D(4))])
    assert r.covered_share is None and r.idle_share is None
    assert r.demand == 0


def _samples(ns, gpu, start, hours, allocated, pending=0, source="cluster", every=60):
    UsageSample.objects.bulk_create(
        UsageSample(
            team_namespace=ns,
            resource=gpu,
            timestamp=start + timedelta(minutes=every * i),
            allocated=D(allocated),
            pending=D(pending),
            source=source,
        )
        for i in range(hours * 60 // every)
    )


@pytest.mark.django_db
def test_the_month_as_it_was_follows_the_values_in_force_and_the_proposal_replaces_them(
    ns_a, ns_b, gpu, alloc_a, admin
):
    # guarantee 6, cap 10 (alloc_a) until June 10 noon, then guarantee 2, cap 4.
    first = AllocationVersion.objects.get(allocation=alloc_a, version=1)
    AllocationVersion.objects.filter(pk=first.pk).update(
        changed_at=datetime(2026, 5, 1, tzinfo=UTC)
    )
    allocation_set(team_namespace=ns_a, resource=gpu, guarantee=2, cap=4, acting_user=admin)
    AllocationVersion.objects.filter(allocation=alloc_a, version=2).update(
        changed_at=datetime(2026, 6, 10, 12, tzinfo=UTC)
    )
    # Hourly samples: 10 hours of 5 running + 3 waiting before the change, 10 hours after.
    _samples(ns_a, gpu, datetime(2026, 6, 10, 2, tzinfo=UTC), 10, 5, 3)
    _samples(ns_a, gpu, datetime(2026, 6, 10, 12, tzinfo=UTC), 10, 5, 3)
    # A sparser second source that day is not counted on top.
    _samples(ns_a, gpu, datetime(2026, 6, 10, 2, tzinfo=UTC), 10, 50, source="csv", every=120)
    # Outside the window: today, and 31 days ago.
    _samples(ns_a, gpu, datetime(2026, 6, 15, 1, tzinfo=UTC), 3, 9)
    _samples(ns_a, gpu, datetime(2026, 5, 14, 1, tzinfo=UTC), 3, 9)

    mine, none = what_ifs([(ns_a.pk, gpu.pk, D(8), D(8)), (ns_b.pk, gpu.pk, D(1), D(2))], now=NOW)
    assert none is None  # no sample of ns_b
    assert (mine.start.isoformat(), mine.end.isoformat()) == ("2026-05-16", "2026-06-14")
    assert (mine.samples, mine.days) == (20, 1)
    # Demand 8 an hour for 20 hours (the last sample stands for the hour since the previous).
    was = mine.was
    assert was.demand == 160
    # Before: cap 10 lets all 8 run, 6 of them guaranteed; after: cap 4 blocks 4, 2 borrowed.
    assert was.blocked == 10 * 4
    assert was.borrowed == 10 * 2 + 10 * 2
    assert was.covered == 10 * 6 + 10 * 2
    assert was.idle == 0
    proposed = mine.proposed
    assert (proposed.blocked, proposed.borrowed, proposed.covered, proposed.idle) == (0, 0, 160, 0)
    assert proposed.guaranteed == 160


@pytest.mark.django_db
def test_the_months_last_sample_counts_its_neighbour_past_the_window_as_the_rollup_does(
    ns_a, gpu, alloc_a
):
    # The source stops at 23:30 on the window's last day and comes back at 2 a.m. today,
    # further than the longest gap (1 h) past the window: the 23:30 sample stands for that gap,
    # as the day's rollup counts it; the first one for the 30 minutes to the second.
    last_day = NOW.date() - timedelta(days=1)
    _samples(ns_a, gpu, datetime(2026, 6, 14, 23, tzinfo=UTC), 1, 4, every=30)
    _samples(ns_a, gpu, datetime(2026, 6, 15, 2, tzinfo=UTC), 1, 4)
    (mine,) = what_ifs([(ns_a.pk, gpu.pk, D(4), D(4))], now=NOW)
    assert (mine.samples, mine.end) == (2, last_day)
    assert mine.was.demand == 6  # 4 for 30 minutes, then for an hour
    usage_rollup(start=last_day, end=last_day)
    assert UsageDaily.objects.get(day=last_day).gpu_hours == mine.was.demand
    # A lone sample a day after the previous one stands for the longest gap likewise.
    UsageSample.objects.all().delete()
    _samples(ns_a, gpu, datetime(2026, 5, 1, 8, tzinfo=UTC), 1, 4)
    _samples(ns_a, gpu, datetime(2026, 6, 14, 12, tzinfo=UTC), 1, 4)
    (lone,) = what_ifs([(ns_a.pk, gpu.pk, D(4), D(4))], now=NOW)
    assert (lone.samples, lone.was.demand) == (1, 4)


@pytest.mark.django_db
def test_the_request_page_shows_each_lines_month_under_the_requested_values(
    ns_a, gpu, alloc_a, lead_a, settings
):
    now = datetime.now(UTC)
    start = (now - timedelta(days=3)).replace(hour=0, minute=0, second=0, microsecond=0)
    _samples(ns_a, gpu, start, 10, 9)  # 9 running for 10 hours, guarantee 6, cap 10
    qr = new_request(lead_a, ns_a, gpu, 9, 12)
    client = Client()
    client.force_login(lead_a)
    html = client.get(f"/requests/{qr.pk}/").content.decode()
    line = qr.lines.get()
    assert f'data-testid="what-if-{line.pk}-was"' in html
    was = html.split(f'data-testid="what-if-{line.pk}-was"')[1].split("</tr>")[0]
    proposed = html.split(f'data-testid="what-if-{line.pk}-proposed"')[1].split("</tr>")[0]
    # As it was: 3 of 9 above the guarantee 6 for 10 hours (67% covered); requested 9: all.
    assert ">30.0<" in was and ">67%<" in was
    assert ">0.0<" in proposed and ">100%<" in proposed and "9 / 12" in proposed


@pytest.mark.django_db
def test_a_line_without_samples_says_so_and_an_extension_has_no_what_if(ns_a, gpu, alloc_a, lead_a):
    qr = new_request(lead_a, ns_a, gpu, 8, 10)
    client = Client()
    client.force_login(lead_a)
    html = client.get(f"/requests/{qr.pk}/").content.decode()
    line = qr.lines.get()
    assert 'data-testid="what-if"' in html
    assert f'data-testid="what-if-{line.pk}-was"' not in html
    assert "nothing to replay" in html
    # An extension changes no amounts: nothing to replay for it.
    assert lines_what_if([line], extension=True) == []
    assert len(lines_what_if([line])) == 1


@pytest.mark.django_db
def test_the_previews_answer_the_what_if_of_each_line(ns_a, gpu, alloc_a, lead_a):
    now = datetime.now(UTC)
    start = (now - timedelta(days=2)).replace(hour=0, minute=0, second=0, microsecond=0)
    _samples(ns_a, gpu, start, 4, 12)  # 12 wanted for 4 hours, cap 10
    qr = new_request(lead_a, ns_a, gpu, 6, 12)
    api = as_user(lead_a)
    saved = api.post(f"/api/v1/requests/{qr.pk}/preview/").json()
    (line,) = saved["what_if"]
    assert (line["namespace"], line["resource"], line["samples"]) == (
        ns_a.name,
        gpu.name,
        4,
    )
    assert (line["guarantee"], line["cap"]) == ("6.000", "12.000")
    assert line["as_it_was"]["blocked"] == "8.000"  # 2 above cap 10 for 4 hours
    assert line["proposed"]["blocked"] == "0.000"
    assert line["proposed"]["borrowed"] == "24.000"
    draft = api.post(
        "/api/v1/requests/preview/",
        {
            "team": ns_a.team.slug,
            "justification": "more",
            "kind": "permanent",
            "lines": [
                {
                    "namespace": ns_a.name,
                    "cluster": ns_a.cluster.name,
                    "resource": gpu.name,
                    "guarantee": "12",
                    "cap": "12",
                }
            ],
        },
        format="json",
    ).json()
    (line,) = draft["what_if"]
    assert line["proposed"]["covered"] == "48.000"
    assert line["proposed"]["idle"] == "0.000"


@pytest.mark.django_db
def test_the_forms_live_check_shows_the_month_under_the_values_being_typed(
    ns_a, gpu, alloc_a, lead_a
):
    now = datetime.now(UTC)
    start = (now - timedelta(days=3)).replace(hour=0, minute=0, second=0, microsecond=0)
    _samples(ns_a, gpu, start, 10, 9)  # 9 running for 10 hours, guarantee 6, cap 10
    client = Client()
    client.force_login(lead_a)
    response = client.post("/requests/validate/", line_data(ns_a, gpu, 9, 10))
    assert response.status_code == 200
    html = response.json()["impact_html"]
    # The unsaved line is named by its position in the form.
    proposed = html.split('data-testid="what-if-new-0-proposed"')[1].split("</tr>")[0]
    was = html.split('data-testid="what-if-new-0-was"')[1].split("</tr>")[0]
    assert ">67%<" in was and ">100%<" in proposed and "9 / 10" in proposed
    # Typing other values changes the answer: guarantee 3 covers a third of the demand.
    html = client.post("/requests/validate/", line_data(ns_a, gpu, 3, 10)).json()["impact_html"]
    proposed = html.split('data-testid="what-if-new-0-proposed"')[1].split("</tr>")[0]
    assert ">33%<" in proposed and "3 / 10" in proposed


@pytest.mark.django_db
def test_the_suggestion_confirm_page_replays_the_suggested_values(
    ns_a, alloc_a, alloc_b, gpu, cluster, lead_a
):
    june_usage_create(alloc_a, alloc_b, gpu)
    s = june_suggestions_create(cluster)["team-a-training"]
    now = datetime.now(UTC)
    start = (now - timedelta(days=3)).replace(hour=0, minute=0, second=0, microsecond=0)
    _samples(ns_a, gpu, start, 10, 5)  # 5 running for 10 hours
    client = Client()
    client.force_login(lead_a)
    html = client.get(f"/requests/from-suggestion/{s.pk}/").content.decode()
    assert 'data-testid="what-if"' in html
    proposed = html.split('data-testid="what-if-new-0-proposed"')[1].split("</tr>")[0]
    # The suggestion lowers the guarantee to 2 and the cap to 4: 1 of 5 is blocked each hour.
    assert "2 / 4" in proposed and ">10.0<" in proposed
