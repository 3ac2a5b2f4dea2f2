from django.apps import AppConfig


class UsageConfig(AppConfig):
    name = "usage"
    verbose_name = "Usage"

    def ready(self) -> None:
        from quotas.locks import lock_first_when_deleting
        from usage.locks import lock_suggestions_deleted_with

        # Deleting a cluster or a team namespace deletes its suggestions: their rows are locked
        # first, in the lock order (portal.locks.LOCK_ORDER).
        lock_first_when_deleting(lock_suggestions_deleted_with)
