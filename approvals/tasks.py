"""Celery tasks of approvals: the periodic moves of the request lifecycle."""

from celery import shared_task

from approvals import notify  # noqa: F401 - registers the notification tasks
from approvals.cap_notices import cap_notices_check
from approvals.grants import requests_expire_due, requests_notify_expiring, requests_start_due
from approvals.lifecycle import requests_follow_syncs
from quotas.models import Cluster


@shared_task(name="approvals.lifecycle_tick", acks_late=True, ignore_result=True)
def lifecycle_tick() -> dict:
    """Start due temporary grants, follow syncs, warn of and end expiring grants."""
    return {
        "started": requests_start_due(),
        "followed": requests_follow_syncs(),
        "warned": requests_notify_expiring(),
        "expired": requests_expire_due(),
    }


@shared_task(name="approvals.notify_near_cap", acks_late=True, ignore_result=True)
def notify_near_cap() -> dict:
    """After the usage readings: tell each team whose allocation reached CAP_NOTICE_SHARE of
    its cap, once per crossing (approvals.cap_notices)."""
    out = {}
    for cluster_id in Cluster.objects.values_list("id", flat=True):
        result = cap_notices_check(cluster_id=cluster_id)
        out[cluster_id] = {"opened": result.opened, "cleared": result.cleared}
    return out
