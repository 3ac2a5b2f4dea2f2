"""The tests' settings (DJANGO_SETTINGS_MODULE in pyproject's pytest section): the portal's
test settings, read once this pytest-xdist worker has its own files and broker
(tests/support/workers.py)."""

import os

from tests.support.workers import isolate

isolate(os.environ, os.environ.get("PYTEST_XDIST_WORKER"))

from portal.settings_test import *  # noqa: E402, F403
