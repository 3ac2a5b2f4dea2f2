from django.apps import AppConfig
from django.db.models.signals import post_migrate


class QuotasConfig(AppConfig):
    name = "quotas"
    verbose_name = "Quotas"

    def ready(self) -> None:
        from quotas import checks  # noqa: F401 - registers the system checks
        from quotas.roles import sync_role_permissions

        post_migrate.connect(sync_role_permissions, dispatch_uid="quotas.sync_role_permissions")
