"""Tokens get a public id (``gqp_<id>_<secret>``) and always an expiry.

The stored 8-character prefix of older tokens held 4 characters of their secret: it is dropped.
Older tokens keep working (they have no public id and are listed as "old-format token #N"), and
those that never expired now expire API_TOKEN_DEFAULT_DAYS after this migration.
"""

import datetime

from django.conf import settings
from django.db import migrations, models
from django.utils import timezone


def give_expiry(apps, schema_editor):
    ApiToken = apps.get_model("portal", "ApiToken")
    expires = timezone.now() + datetime.timedelta(days=settings.API_TOKEN_DEFAULT_DAYS)
    ApiToken.objects.filter(expires_at__isnull=True).update(expires_at=expires)


class Migration(migrations.Migration):
    dependencies = [
        ("portal", "0002_apitoken"),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="public_id",
            field=models.CharField(editable=False, max_length=16, null=True, unique=True),
        ),
        migrations.RemoveField(model_name="apitoken", name="prefix"),
        migrations.RunPython(give_expiry, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="apitoken",
            name="expires_at",
            field=models.DateTimeField(),
        ),
    ]
