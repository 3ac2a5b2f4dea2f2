"""The usage and suggestion models are the usage app's now (usage 0001; the same tables)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("quotas", "0009_verbose_names"),
        ("usage", "0001_initial"),
        ("approvals", "0009_suggestion_in_usage_app"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="PrometheusSource"),
                migrations.DeleteModel(name="Suggestion"),
                migrations.DeleteModel(name="UsageDaily"),
                migrations.DeleteModel(name="UsageSample"),
            ],
        ),
    ]
