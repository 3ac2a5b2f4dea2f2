"""The parallel run's isolation (tests/support/workers.py): each xdist worker on its own files,
broker and Redis database; this very process too, when it is a worker."""

import os

from django.conf import settings

from tests.support.workers import isolate, worker_redis_url


def test_redis_databases_move_per_worker_and_other_urls_stay():
    assert worker_redis_url("redis://127.0.0.1:6379/4", 1) == "redis://127.0.0.1:6379/5"
    assert worker_redis_url("redis://:pw@h:6379", 0) == "redis://:pw@h:6379/0"
    assert worker_redis_url("redis://h/15", 2) == "redis://h/1"
    assert worker_redis_url("filesystem://", 3) == "filesystem://"


def test_a_worker_gets_its_own_folder_and_broker(tmp_path):
    environ = {
        "PORTAL_VAR_DIR": str(tmp_path),
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
        "CELERY_BROKER_FOLDER": str(tmp_path / "broker"),
    }
    isolate(environ, "gw1")
    assert environ == {
        "PORTAL_VAR_DIR": str(tmp_path / "xdist-gw1"),
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/1",
        "CELERY_BROKER_FOLDER": str(tmp_path / "broker" / "gw1"),
        "PORTAL_TEST_WORKER_ISOLATED": "gw1",
    }
    assert (tmp_path / "xdist-gw1").is_dir()
    untouched = dict(environ)
    isolate(environ, None)
    isolate(environ, "gw1")  # a process the worker started: already its own
    assert environ == untouched


def test_this_worker_runs_on_its_own_settings():
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        assert settings.CELERY_BROKER_FOLDER.parent.name == f"xdist-{worker}" or (
            settings.CELERY_BROKER_FOLDER.name == worker
        )
        assert f"xdist-{worker}" in os.environ["PORTAL_VAR_DIR"]
