from django.apps import AppConfig
from django.db.models.signals import post_migrate


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = "Portal"

    def ready(self) -> None:
        from portal.schedules import ensure_default_schedules

        post_migrate.connect(
            ensure_default_schedules, sender=self, dispatch_uid="portal.default_schedules"
        )
