"""Probes: /healthz says the process is up, /readyz that the database and the broker answer."""

import re
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import connections
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from kombu import Connection

_CREDENTIALS = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^@/\s]*@", re.IGNORECASE)
_PASSWORD_ARG = re.compile(r"(password\s*=\s*)\S+", re.IGNORECASE)


def redact(text: str) -> str:
    """Drop credentials from URLs and connection strings before a reason is shown."""
    text = _CREDENTIALS.sub(r"\g<scheme>***@", text)
    return _PASSWORD_ARG.sub(r"\1***", text)


def check_database(alias: str = "default") -> None:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def check_broker() -> None:
    url = settings.CELERY_BROKER_URL
    options = dict(getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}) or {})
    timeout = settings.READYZ_BROKER_TIMEOUT
    if url.startswith("filesystem://"):
        # The file transport "connects" to anything; what matters is that its folders exist.
        for key in ("data_folder_in", "data_folder_out", "processed_folder"):
            folder = Path(options.get(key, ""))
            if not folder.is_dir():
                raise OSError(f"broker folder {key} missing: {folder}")
        return
    options.setdefault("socket_connect_timeout", timeout)
    options.setdefault("socket_timeout", timeout)
    with Connection(url, connect_timeout=timeout, transport_options=options) as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=timeout)
        if url.startswith(("redis://", "rediss://")):
            # A real round trip: the Redis transport connects lazily.
            conn.default_channel.client.ping()


def _run(check: Callable[[], None]) -> dict:
    started = time.monotonic()
    try:
        check()
    except Exception as exc:
        return {
            "ok": False,
            "error": redact(f"{type(exc).__name__}: {exc}".strip())[:500],
            "ms": round((time.monotonic() - started) * 1000),
        }
    return {"ok": True, "ms": round((time.monotonic() - started) * 1000)}


@never_cache
def healthz(_request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def readiness() -> tuple[bool, dict]:
    checks = {"database": _run(check_database), "broker": _run(check_broker)}
    return all(c["ok"] for c in checks.values()), checks


@never_cache
def readyz(_request: HttpRequest) -> JsonResponse:
    ready, checks = readiness()
    return JsonResponse(
        {"status": "ready" if ready else "not ready", "checks": checks},
        status=200 if ready else 503,
    )
