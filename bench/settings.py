"""Settings of the page benchmarks: the portal's own settings (same middleware, sessions,
authentication, throttles, templates) with the URLconf of bench/urls.py, which adds the trivial
views the pages are measured against, and the test client's host name allowed."""

from portal.settings import *  # noqa: F403
from portal.settings import ALLOWED_HOSTS

ROOT_URLCONF = "bench.urls"
ALLOWED_HOSTS = [*ALLOWED_HOSTS, "testserver"]
