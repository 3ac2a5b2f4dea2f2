"""The idempotency keys are the common app's now (common 0001; the same table)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("portal", "0005_verbose_names"),
        ("common", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(
                    name="IdempotencyKey",
                ),
            ],
        ),
    ]
