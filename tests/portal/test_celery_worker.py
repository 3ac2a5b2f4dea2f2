"""A real Celery worker, against the configured broker (Redis in CI), runs a database task."""

import os

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings

from portal.celery import app
from portal.models import WorkerHeartbeat
from portal.tasks import worker_heartbeat


@pytest.mark.django_db(transaction=True)
def test_real_worker_runs_a_task_that_reads_and_writes_the_database():
    app.loader.import_module("celery.contrib.testing.tasks")
    with start_worker(app, pool="solo", perform_ping_check=True, shutdown_timeout=30):
        first = worker_heartbeat.delay().get(timeout=60)
        second = worker_heartbeat.delay().get(timeout=60)
    assert second["hostname"] == first["hostname"]
    # The second run read the row the first one wrote, through the database.
    assert second["beats"] == first["beats"] + 1
    assert WorkerHeartbeat.objects.get(hostname=first["hostname"]).beats == second["beats"]


def test_broker_is_the_configured_one():
    expected = "redis" if settings.CELERY_BROKER_URL.startswith("redis") else "filesystem"
    assert app.connection_for_write().transport.driver_type == expected


@pytest.mark.skipif(os.environ.get("CI") != "true", reason="CI must run on the real services")
def test_ci_runs_on_postgresql_and_redis():
    """In CI the suite must not quietly fall back to SQLite or the file broker."""
    assert settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
    assert settings.CELERY_BROKER_URL.startswith("redis://")
