from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        from approvals.receivers import follow_finished_sync
        from quotas.signals import sync_finished

        sync_finished.connect(follow_finished_sync, dispatch_uid="approvals.follow_finished_sync")
