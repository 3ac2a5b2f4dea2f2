from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        from approvals.models import QuotaRequest
        from approvals.receivers import follow_finished_sync
        from quotas.audit import audit_team_targets
        from quotas.signals import sync_finished

        sync_finished.connect(follow_finished_sync, dispatch_uid="approvals.follow_finished_sync")
        # The audit log's team filter finds the events of a team's requests too.
        audit_team_targets(
            QuotaRequest.__name__, lambda team_id: QuotaRequest.objects.filter(team_id=team_id)
        )
