"""Each pytest-xdist worker on its own files and broker, set up before Django reads its settings
(tests/support/settings.py, the tests' settings module, calls ``isolate`` first).

pytest-django already gives every worker its own test database (``test_<name>_gw0``, ...). What
the settings read from the environment is made per worker here: ``PORTAL_VAR_DIR`` (the SQLite
test database, the file broker's folders under ``celery-test/``) gets a ``xdist-gw<N>/``
subfolder, and a Redis broker (and result backend) URL moves to database ``(base + N) % 16``, so
no worker runs, purges or reads another worker's tasks. Without xdist nothing changes; a process
a worker starts (which inherits its environment) is not moved again."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parents[2]


def worker_redis_url(url: str, index: int) -> str:
    """``url`` with its Redis database moved ``index`` places (mod the 16 a default Redis has)."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        return url
    base = int(parts.path.strip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{(base + index) % 16}"))


DONE = "PORTAL_TEST_WORKER_ISOLATED"


def isolate(environ: os._Environ | dict, worker: str | None) -> None:
    if not worker or environ.get(DONE) == worker:
        return
    environ[DONE] = worker
    index = int(worker.removeprefix("gw"))
    var_dir = Path(environ.get("PORTAL_VAR_DIR", REPO / "var")) / f"xdist-{worker}"
    var_dir.mkdir(parents=True, exist_ok=True)
    environ["PORTAL_VAR_DIR"] = str(var_dir)
    if "CELERY_BROKER_FOLDER" in environ:
        environ["CELERY_BROKER_FOLDER"] = str(Path(environ["CELERY_BROKER_FOLDER"]) / worker)
    for name in ("CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"):
        if name in environ:
            environ[name] = worker_redis_url(environ[name], index)
