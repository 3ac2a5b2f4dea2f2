"""Default periodic tasks, created in django-celery-beat's tables so admins can edit them.

Only missing entries are created: an admin's change of interval or an entry switched off
survives restarts and migrations.
"""

from dataclasses import dataclass

from django.conf import settings

from common.migrating import tables_made


@dataclass(frozen=True)
class DefaultSchedule:
    name: str
    task: str
    every_seconds: int | None
    description: str
    # A crontab entry instead of an interval: {"minute", "hour", "day_of_month"}.
    crontab: dict[str, str] | None = None


DEFAULT_SCHEDULES: list[DefaultSchedule] = [
    DefaultSchedule(
        name="worker heartbeat",
        task="portal.worker_heartbeat",
        every_seconds=60,
        description="Each worker records that it is alive.",
    ),
    DefaultSchedule(
        name="reconcile clusters",
        task="quotas.reconcile_clusters",
        every_seconds=60,
        description="Re-drive pending and failed syncs; check clusters for drift.",
    ),
    DefaultSchedule(
        name="request lifecycle",
        task="approvals.lifecycle_tick",
        every_seconds=60,
        description="Start and end temporary grants, follow syncs of approved requests.",
    ),
    DefaultSchedule(
        name="collect usage",
        task="quotas.collect_usage",
        every_seconds=settings.USAGE_COLLECT_SECONDS,
        description="Read every cluster's pods and queues (and its Prometheus) into usage samples.",
    ),
    DefaultSchedule(
        name="notify near cap",
        task="approvals.notify_near_cap",
        every_seconds=settings.USAGE_COLLECT_SECONDS,
        description="Tell a team (dashboard, e-mail, webhook) when an allocation nears its cap.",
    ),
    DefaultSchedule(
        name="roll up usage",
        task="quotas.rollup_usage",
        every_seconds=settings.USAGE_ROLLUP_SECONDS,
        description="Daily usage rollups of yesterday and today; prune samples past retention.",
    ),
    DefaultSchedule(
        name="usage sample partitions",
        task="usage.ensure_sample_partitions",
        every_seconds=24 * 3600,
        description="Make the usage samples' month partitions ahead (PostgreSQL).",
    ),
    DefaultSchedule(
        name="monthly suggestions",
        task="quotas.compute_suggestions",
        every_seconds=None,
        crontab={
            "minute": "0",
            "hour": str(settings.SUGGESTIONS_HOUR),
            "day_of_month": str(settings.SUGGESTIONS_DAY_OF_MONTH),
        },
        description="Suggest next month's guarantee and cap of every namespace from last month.",
    ),
    DefaultSchedule(
        name="anchor audit log",
        task="quotas.anchor_audit_log",
        every_seconds=settings.AUDIT_ANCHOR_SECONDS,
        description="Write the audit log's head (seq, hash, MAC) outside the database.",
    ),
]


def ensure_default_schedules(*, apps=None, **_kwargs) -> int:
    """Create the default periodic tasks that do not exist yet; returns how many were created.
    After a migrate (``apps``): not before django_celery_beat's tables are made."""
    from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

    beat = ("PeriodicTask", "CrontabSchedule", "IntervalSchedule")
    if not tables_made(apps, *(f"django_celery_beat.{model}" for model in beat)):
        return 0
    created = 0
    for entry in DEFAULT_SCHEDULES:
        if PeriodicTask.objects.filter(name=entry.name).exists():
            continue
        when: dict = {}
        if entry.crontab is not None:
            when["crontab"], _ = CrontabSchedule.objects.get_or_create(
                **entry.crontab,
                day_of_week="*",
                month_of_year="*",
                timezone=settings.TIME_ZONE,
            )
        else:
            when["interval"], _ = IntervalSchedule.objects.get_or_create(
                every=entry.every_seconds, period=IntervalSchedule.SECONDS
            )
        PeriodicTask.objects.create(
            name=entry.name, task=entry.task, description=entry.description, **when
        )
        created += 1
    return created
