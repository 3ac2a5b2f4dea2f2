"""Test settings: the environment-driven settings with only what tests must change."""

import os
from pathlib import Path

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
# Tests never share the file broker's folders with a demo running from the same checkout.
os.environ.setdefault(
    "CELERY_BROKER_FOLDER",
    str(
        Path(os.environ.get("PORTAL_VAR_DIR", Path(__file__).resolve().parent.parent / "var"))
        / "celery-test"
    ),
)

from portal.settings import *  # noqa: F403
from portal.settings import DATABASES, VAR_DIR

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
DEBUG = False
ALLOWED_HOSTS = ["*"]
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
# Clusters of tests reach only the sandboxes the tests start, never a demo on the default port.
KUBE_SANDBOX_URL = "http://127.0.0.1:9"
# No anchor file shared by every test (the demo's default in PORTAL_VAR_DIR): a test that
# anchors names its own.
AUDIT_ANCHOR_FILE = ""
# The fixtures make users directly, not as an admin would; the tests of those receivers turn
# them on (tests/quotas/test_admin_audit.py).
AUDIT_USERS_WRITTEN_ELSEWHERE = False
KUBE_REQUEST_TIMEOUT = 5.0
# Throttle counts stay in each test process's memory and are cleared between tests
# (tests/conftest.py); tests/portal/test_api_throttling.py runs them on Redis too.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
