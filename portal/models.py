"""Operational rows of the portal itself (not domain data)."""

from django.db import models


class WorkerHeartbeat(models.Model):
    """Last sign of life of each Celery worker, written by a periodic task."""

    hostname = models.CharField(max_length=255, unique=True)
    last_seen = models.DateTimeField()
    beats = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["-last_seen"]

    def __str__(self) -> str:
        return f"{self.hostname} @ {self.last_seen:%Y-%m-%d %H:%M:%S}"
