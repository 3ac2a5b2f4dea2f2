"""Tasks of the portal itself."""

from celery import shared_task
from django.db import transaction
from django.utils import timezone

from portal.models import WorkerHeartbeat


@shared_task(name="portal.worker_heartbeat", ignore_result=False)
def worker_heartbeat() -> dict:
    """Record that a worker is alive; shown to admins and used by tests as a DB round trip."""
    hostname = worker_heartbeat.request.hostname or "unknown"
    with transaction.atomic():
        beat, _ = WorkerHeartbeat.objects.select_for_update().get_or_create(
            hostname=hostname, defaults={"last_seen": timezone.now()}
        )
        beat.beats += 1
        beat.last_seen = timezone.now()
        beat.save()
    return {"hostname": hostname, "beats": beat.beats}
