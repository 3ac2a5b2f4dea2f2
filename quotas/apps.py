from django.apps import AppConfig
from django.db.models.signals import m2m_changed, post_migrate, post_save, pre_save


class QuotasConfig(AppConfig):
    name = "quotas"
    verbose_name = "Quotas"

    def ready(self) -> None:
        from quotas import checks  # noqa: F401 - registers the system checks
        from quotas.roles import sync_role_permissions

        post_migrate.connect(sync_role_permissions, dispatch_uid="quotas.sync_role_permissions")
        # Who is a platform admin or an auditor, also when written outside the services
        # (createsuperuser, the shell): audited (quotas.people).
        from django.contrib.auth.models import User

        from quotas import people

        pre_save.connect(people.user_before_elsewhere, sender=User, dispatch_uid="quotas.user.pre")
        post_save.connect(
            people.user_changed_elsewhere, sender=User, dispatch_uid="quotas.user.post"
        )
        for through in (User.groups.through, User.user_permissions.through):
            m2m_changed.connect(
                people.user_links_changed_elsewhere,
                sender=through,
                dispatch_uid=f"quotas.user.links.{through.__name__}",
            )
