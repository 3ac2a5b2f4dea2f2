"""A team told when an allocation nears its cap: once per crossing, by e-mail to its leads and a
signed webhook, and on the dashboard at every visit; never from a stale reading, never twice
when two workers read the cluster at once."""

import json
import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core import mail
from django.db import connection
from django.utils import timezone

from approvals.cap_notices import cap_notices_check, near_cap
from approvals.notify import email_body, email_subject
from approvals.tasks import notify_near_cap
from quotas.models import TeamMembership
from tests.support.notify import SECRET, Receiver
from tests.support.people import make_user
from usage.models import CapNotice, UsageSample

D = Decimal


@pytest.mark.parametrize(
    ("used", "cap", "share", "near"),
    [
        ("9", "10", 0.9, True),
        ("8.999", "10", 0.9, False),
        ("12", "10", 0.9, True),
        ("1", "1", 0.9, True),
        ("0", "0", 0.9, False),  # a zero cap is a namespace without GPUs, not one at its cap
        ("10", "10", 0, False),  # switched off
        (None, "10", 0.9, False),
    ],
)
def test_near_the_cap_is_the_share_of_the_cap(settings, used, cap, share, near):
    settings.CAP_NOTICE_SHARE = share
    assert near_cap(None if used is None else D(used), D(cap)) is near


def _reading(ns, gpu, allocated, *, ago=timedelta(minutes=1)):
    UsageSample.objects.create(
        team_namespace=ns,
        resource=gpu,
        timestamp=timezone.now() - ago,
        allocated=D(allocated),
        source="cluster",
    )


@pytest.fixture
def told(settings, eager):
    """Webhooks to a real receiver; e-mail to Django's outbox; tasks run at the commit."""
    with Receiver() as receiver:
        settings.WEBHOOK_URLS = [f"{receiver.url}/hooks"]
        settings.WEBHOOK_SECRET = SECRET
        settings.CAP_NOTICE_SHARE = 0.9
        yield receiver


def _webhook_events(receiver, count):
    receiver.wait_for(count)
    return [json.loads(r["body"]) for r in receiver.requests]


@pytest.mark.django_db(transaction=True)
def test_crossing_the_line_tells_the_leads_once_by_mail_and_webhook(
    told, cluster, plan, gpu, lead_a, member_a
):
    second_lead = make_user("lead-a2")
    TeamMembership.objects.create(
        team=plan["team-a"].team, user=second_lead, role=TeamMembership.Role.LEAD
    )
    _reading(plan["team-a"], gpu, 9)  # cap 10
    _reading(plan["team-b"], gpu, 5)  # cap 6: 0.83, below the line

    assert cap_notices_check(cluster_id=cluster.pk).opened == 1
    [message] = mail.outbox
    assert sorted(message.to) == ["lead-a2@example.com", "lead-a@example.com"]  # not the member
    assert message.subject == (
        "[GPU quota] team-a near its cap: 9 of 10 nvidia.com/gpu in team-a-training on demo"
    )
    assert "wait as pending" in message.body
    assert "/?team=team-a" in message.body and "Open the request" not in message.body
    [event] = _webhook_events(told, 1)
    assert event["event"] == "team.near_cap"
    assert event["data"] | {"url": None} == {
        "team": "team-a",
        "cluster": "demo",
        "namespace": "team-a-training",
        "resource": "nvidia.com/gpu",
        "used": "9",
        "cap": "10",
        "share": "0.9",
        "url": None,
    }

    # The next readings at the same level tell nobody again.
    _reading(plan["team-a"], gpu, "9.5", ago=timedelta(seconds=10))
    assert cap_notices_check(cluster_id=cluster.pk).opened == 0
    assert notify_near_cap() == {cluster.pk: {"opened": 0, "cleared": 0}}
    assert len(mail.outbox) == 1 and len(told.requests) == 1


@pytest.mark.django_db(transaction=True)
def test_told_again_only_after_the_reading_fell_below_the_margin(told, cluster, plan, gpu, lead_a):
    ns = plan["team-a"]
    steps = [("9", 1, 0), ("8.5", 0, 0), ("7.9", 0, 1), ("8.9", 0, 0), ("9", 1, 0)]
    for i, (used, opened, cleared) in enumerate(steps):
        _reading(ns, gpu, used, ago=timedelta(seconds=60 - i))
        result = cap_notices_check(cluster_id=cluster.pk)
        assert (result.opened, result.cleared) == (opened, cleared), used
    assert len(mail.outbox) == 2
    notices = CapNotice.objects.order_by("opened_at")
    # The first notice cleared at 7.9; the second, open, from the new crossing.
    assert [(n.used, n.cleared_at is None) for n in notices] == [(D(9), False), (D(9), True)]


@pytest.mark.django_db(transaction=True)
def test_a_stale_reading_or_a_zero_share_tells_nobody(told, settings, cluster, plan, gpu, lead_a):
    _reading(plan["team-a"], gpu, 10, ago=timedelta(minutes=16))  # three readings missed
    assert cap_notices_check(cluster_id=cluster.pk).opened == 0
    _reading(plan["team-a"], gpu, 10)
    settings.CAP_NOTICE_SHARE = 0
    assert cap_notices_check(cluster_id=cluster.pk).opened == 0
    assert mail.outbox == [] and CapNotice.objects.count() == 0


def test_the_mail_says_what_is_near_which_cap_and_where_to_act():
    payload = {
        "team": "team-a",
        "cluster": "demo",
        "namespace": "team-a-training",
        "resource": "nvidia.com/gpu",
        "used": "9",
        "cap": "10",
        "url": "https://quota.example.com/?team=team-a",
    }
    assert email_subject("team.near_cap", payload) == (
        "[GPU quota] team-a near its cap: 9 of 10 nvidia.com/gpu in team-a-training on demo"
    )
    body = email_body("team.near_cap", payload)
    assert body.startswith("Team-a near its cap: 9 of 10 nvidia.com/gpu")
    assert "Open the team's dashboard: https://quota.example.com/?team=team-a" in body
    assert email_subject("team.near_cap", {**payload, "team": "a\u202eb"}).count("\u202e") == 0


@pytest.mark.django_db(transaction=True)
def test_two_workers_reading_at_once_tell_the_team_once(told, cluster, plan, gpu, lead_a):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers need PostgreSQL (SQLite serialises the whole database)")
    _reading(plan["team-a"], gpu, 10)
    barrier = threading.Barrier(2)
    results = []

    def check():
        try:
            barrier.wait()
            results.append(cap_notices_check(cluster_id=cluster.pk).opened)
        finally:
            connection.close()

    threads = [threading.Thread(target=check) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [0, 1]
    assert CapNotice.objects.filter(cleared_at__isnull=True).count() == 1
    assert len(mail.outbox) == 1
    assert len(_webhook_events(told, 1)) == 1


@pytest.mark.django_db
def test_the_dashboard_shows_the_notice_to_the_team_and_to_no_other(
    client, settings, plan, gpu, lead_a, other_team_lead, admin
):
    settings.CAP_NOTICE_SHARE = 0.9
    _reading(plan["team-a"], gpu, 9)
    _reading(plan["team-b"], gpu, 3)

    client.force_login(lead_a)
    page = client.get("/").content.decode()
    assert 'data-testid="near-cap-team-a"' in page
    assert "team-a-training on demo uses 9 of its cap 10 A100 card" in page
    assert 'class="num near-cap" data-label="Used now" data-testid="used"' in page

    client.force_login(other_team_lead)
    page = client.get("/").content.decode()
    assert "near-cap-" not in page and "team-a-training" not in page

    client.force_login(admin)
    page = client.get("/").content.decode()
    assert page.count('data-testid="near-cap-') == 1
