"""A migrate of some apps alone on a new database: the receivers after it wait for their
tables instead of failing the command."""

import os
import sqlite3
import subprocess
import sys

from tests.support.portal_process import ROOT, UNSET


def test_migrating_one_app_on_a_new_database_leaves_the_others_for_later(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env.update({"PORTAL_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "portal.settings"})
    done = subprocess.run(
        [sys.executable, "manage.py", "migrate", "contenttypes", "--verbosity", "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # Before: "no such table: auth_group" from the role groups' receiver, then the schedules'.
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(tmp_path / "portal.sqlite3") as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
    assert "django_content_type" in tables
    assert not tables & {"auth_group", "django_celery_beat_periodictask"}
