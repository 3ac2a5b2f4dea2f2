"""The Celery app of the portal; tasks live in each app's ``tasks.py``."""

import os

from celery import Celery
from kombu.transport import TRANSPORT_ALIASES

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

# filesystem:// is the demo's broker with its messages written whole (portal/broker.py).
TRANSPORT_ALIASES["filesystem"] = "portal.broker:Transport"

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
