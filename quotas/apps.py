from django.apps import AppConfig
from django.db.models.signals import post_delete, post_migrate, post_save


class QuotasConfig(AppConfig):
    name = "quotas"
    verbose_name = "Quotas"

    def ready(self) -> None:
        from quotas import checks  # noqa: F401 - registers the system checks
        from quotas.roles import sync_role_permissions

        post_migrate.connect(sync_role_permissions, dispatch_uid="quotas.sync_role_permissions")
        # A changed membership or team (its parent: departments) forgets the team ids a web
        # request has kept (quotas.selectors.team_ids_of).
        from quotas.models import Team, TeamMembership
        from quotas.selectors import forget_team_ids

        for model in (Team, TeamMembership):
            for signal in (post_save, post_delete):
                signal.connect(
                    forget_team_ids,
                    sender=model,
                    dispatch_uid=f"quotas.forget_team_ids.{model.__name__}.{signal is post_save}",
                )
