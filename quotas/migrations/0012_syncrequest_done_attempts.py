"""Sync requests done before their successful run was counted as an attempt: count it."""

from django.db import migrations
from django.db.models import F


def count_the_successful_run(apps, schema_editor):
    SyncRequest = apps.get_model("quotas", "SyncRequest")
    SyncRequest.objects.filter(status="done").update(attempts=F("attempts") + 1)


class Migration(migrations.Migration):
    dependencies = [
        ("quotas", "0011_syncrequest_namespaces"),
    ]

    operations = [
        # Backwards: nothing to undo that a count could tell apart.
        migrations.RunPython(count_the_successful_run, migrations.RunPython.noop),
    ]
