"""A request's suggestion is the usage app's now (the same table)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0008_verbose_names"),
        ("usage", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="quotarequest",
                    name="suggestion",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="usage.suggestion",
                        verbose_name="suggestion",
                    ),
                ),
            ],
        ),
    ]
