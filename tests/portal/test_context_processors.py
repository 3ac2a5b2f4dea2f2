"""Context every page gets: the workers' last signs of life reach platform admins only."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from portal.models import WorkerHeartbeat

pytestmark = pytest.mark.django_db


@pytest.fixture
def heartbeat():
    return WorkerHeartbeat.objects.create(hostname="celery@worker-7", last_seen=timezone.now())


def test_platform_admin_sees_the_workers_on_the_cluster_overview(client, admin, heartbeat):
    client.force_login(admin)
    page = client.get("/clusters/").content.decode()
    assert "Workers" in page and "celery@worker-7" in page


def test_a_lead_and_an_auditor_do_not(client, lead_a, auditor, heartbeat):
    for user in (lead_a, auditor):
        client.force_login(user)
        assert "celery@worker-7" not in client.get("/clusters/").content.decode()


def test_only_a_page_that_shows_the_workers_reads_them(client, admin, heartbeat):
    client.force_login(admin)
    assert _heartbeat_reads(client, "/clusters/") == 1
    assert _heartbeat_reads(client, "/tokens/") == 0


def _heartbeat_reads(client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return sum("portal_workerheartbeat" in q["sql"] for q in ctx.captured_queries)
