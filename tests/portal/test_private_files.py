"""The demo's data folder: the SQLite database (session keys, token digests) and the Celery
file broker's messages are the owner's alone, on a fresh machine and after an older run left
them readable to all."""

import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UNSET = ("DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "CELERY_BROKER_FOLDER")


def migrate(var: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env.update({"PORTAL_VAR_DIR": str(var), "DJANGO_SETTINGS_MODULE": "portal.settings"})
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--verbosity", "0"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=300,
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_fresh_demo_keeps_its_database_and_broker_private(tmp_path):
    var = tmp_path / "var"
    migrate(var)
    assert mode(var) == 0o700
    assert mode(var / "portal.sqlite3") == 0o600
    assert (var / "portal.sqlite3").stat().st_size > 0
    for folder in ("celery", "celery/queue", "celery/results", "celery/processed"):
        assert mode(var / folder) == 0o700, folder


def test_files_an_older_run_left_open_are_closed(tmp_path):
    var = tmp_path / "var"
    var.mkdir(mode=0o755)
    database = var / "portal.sqlite3"
    database.touch(mode=0o644)
    database.chmod(0o644)
    var.chmod(0o755)
    migrate(var)
    assert mode(var) == 0o700
    assert mode(database) == 0o600
