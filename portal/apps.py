from django.apps import AppConfig
from django.db.models.signals import post_migrate


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = "Portal"

    def ready(self) -> None:
        from portal.models import ApiToken
        from portal.schedules import ensure_default_schedules
        from portal.sso import checks  # noqa: F401 (registers the single sign-on checks)
        from portal.tokens import api_token_target_words
        from quotas.audit.targets import audit_target_words

        # The audit log names a token in the reader's words.
        audit_target_words(ApiToken.__name__, api_token_target_words)

        post_migrate.connect(
            ensure_default_schedules, sender=self, dispatch_uid="portal.default_schedules"
        )
