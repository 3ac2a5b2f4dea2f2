"""/healthz and /readyz, in process and against a real server with broken dependencies."""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from portal.health import redact
from tests.support.net import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_healthz_answers_without_database(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_is_ready_with_the_configured_services(client):
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["checks"]["database"]["ok"] and body["checks"]["broker"]["ok"]


def test_redact_hides_credentials():
    assert redact("redis://:hunter2@host:6379/0 down") == "redis://***@host:6379/0 down"
    assert "hunter2" not in redact("host=db password=hunter2 user=x")
    assert "hunter2" not in redact("postgresql://portal:hunter2@db/portal")


def _serve(env_overrides: dict[str, str], tmp_path: Path):
    """Run the WSGI app in gunicorn, as production does, with the given environment."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "portal.settings",
            "PORTAL_VAR_DIR": str(tmp_path),
            "READYZ_BROKER_TIMEOUT": "2",
            **env_overrides,
        }
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "portal.wsgi",
            "-b",
            f"127.0.0.1:{port}",
            "-w",
            "1",
            "--no-control-socket",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    return proc, f"http://127.0.0.1:{port}"


def _get(url: str, deadline: float) -> tuple[int, dict]:
    while True:
        try:
            with urllib.request.urlopen(url, timeout=15) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.mark.parametrize(
    ("env", "broken", "reason_part"),
    [
        (
            {"DATABASE_URL": "postgresql://portal:s3cret-pw@127.0.0.1:1/portal"},
            "database",
            "OperationalError",
        ),
        ({"CELERY_BROKER_URL": "redis://:s3cret-pw@127.0.0.1:1/0"}, "broker", "Error"),
    ],
)
def test_readyz_reports_a_broken_dependency_as_503_with_reason(tmp_path, env, broken, reason_part):
    proc, url = _serve(env, tmp_path)
    try:
        status, body = _get(url + "/readyz", deadline=time.monotonic() + 30)
        assert status == 503, body
        assert body["status"] == "not ready"
        assert body["checks"][broken]["ok"] is False
        assert reason_part in body["checks"][broken]["error"]
        assert "s3cret-pw" not in json.dumps(body)
        healthy = [name for name in ("database", "broker") if name != broken]
        assert all(body["checks"][name]["ok"] for name in healthy), body
        # The process itself is fine: liveness stays green while readiness is red.
        assert _get(url + "/healthz", deadline=time.monotonic() + 5) == (200, {"status": "ok"})
    finally:
        proc.terminate()
        proc.wait(timeout=15)
