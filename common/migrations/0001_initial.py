"""The common app takes over the portal's idempotency keys: the table portal_idempotencykey stays
as it is, only Django's idea of which app holds it moves."""

import django.core.serializers.json
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def content_types_to_common(apps, schema_editor):
    """Keep the content types (and so the permissions given to the role groups, and the admin's
    log) of the moved models: portal -> common."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.filter(app_label="portal", model__in=("idempotencykey",)).update(
        app_label="common"
    )


def content_types_to_common_back(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.filter(app_label="common", model__in=("idempotencykey",)).update(
        app_label="portal"
    )


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("portal", "0005_verbose_names"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="IdempotencyKey",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("key", models.CharField(max_length=255, verbose_name="key")),
                        (
                            "fingerprint",
                            models.CharField(max_length=64, verbose_name="fingerprint"),
                        ),
                        ("method", models.CharField(max_length=10, verbose_name="method")),
                        ("path", models.CharField(max_length=500, verbose_name="path")),
                        (
                            "state",
                            models.CharField(
                                choices=[("in_progress", "in progress"), ("done", "done")],
                                default="in_progress",
                                max_length=12,
                                verbose_name="state",
                            ),
                        ),
                        (
                            "created_at",
                            models.DateTimeField(auto_now_add=True, verbose_name="created at"),
                        ),
                        (
                            "expires_at",
                            models.DateTimeField(db_index=True, verbose_name="expires at"),
                        ),
                        (
                            "response_status",
                            models.PositiveSmallIntegerField(
                                blank=True, null=True, verbose_name="response status"
                            ),
                        ),
                        (
                            "response_body",
                            models.JSONField(
                                blank=True,
                                encoder=django.core.serializers.json.DjangoJSONEncoder,
                                null=True,
                                verbose_name="response body",
                            ),
                        ),
                        (
                            "response_headers",
                            models.JSONField(
                                blank=True, default=dict, verbose_name="response headers"
                            ),
                        ),
                        (
                            "user",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="idempotency_keys",
                                to=settings.AUTH_USER_MODEL,
                                verbose_name="user",
                            ),
                        ),
                    ],
                    options={
                        "verbose_name": "idempotency key",
                        "verbose_name_plural": "idempotency keys",
                        "db_table": "portal_idempotencykey",
                        "ordering": ["-created_at"],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("user", "key"), name="idempotencykey_unique_user_key"
                            )
                        ],
                    },
                ),
            ],
        ),
        migrations.RunPython(content_types_to_common, content_types_to_common_back),
    ]
