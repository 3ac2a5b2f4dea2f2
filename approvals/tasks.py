"""Celery tasks of approvals: the periodic moves of the request lifecycle."""

from celery import shared_task

from approvals import notify  # noqa: F401 - registers the notification tasks
from approvals.grants import requests_expire_due, requests_notify_expiring, requests_start_due
from approvals.lifecycle import requests_follow_syncs


@shared_task(name="approvals.lifecycle_tick", acks_late=True, ignore_result=True)
def lifecycle_tick() -> dict:
    """Start due temporary grants, follow syncs, warn of and end expiring grants."""
    return {
        "started": requests_start_due(),
        "followed": requests_follow_syncs(),
        "warned": requests_notify_expiring(),
        "expired": requests_expire_due(),
    }
