"""Project package: settings, URLs, the Celery app, the UI shell, auth and probes."""

from portal.celery import app as celery_app

__all__ = ["celery_app"]
