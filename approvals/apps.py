from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        from django.db.models import CharField, IntegerField
        from django.urls import reverse

        from approvals.models import QuotaRequest, RequestComment
        from approvals.receivers import follow_finished_sync
        from approvals.selectors import request_target_words
        from quotas.audit.chain import AuditCoverage, audit_coverage, audit_team_targets
        from quotas.audit.targets import audit_target_pages, audit_target_words
        from quotas.signals import sync_finished

        sync_finished.connect(follow_finished_sync, dispatch_uid="approvals.follow_finished_sync")
        # The audit log's team filter finds the events of a team's requests too.
        audit_team_targets(
            QuotaRequest.__name__, lambda team_id: QuotaRequest.objects.filter(team_id=team_id)
        )
        # The audit log names a request in words and links its events to the request's page.
        audit_target_words(QuotaRequest.__name__, request_target_words)
        audit_target_pages(
            QuotaRequest.__name__, lambda pk, facts: reverse("requests-detail", args=[pk])
        )
        # verify_audit_chain holds the log against the requests: each has the event of its
        # creation (lifecycle) and the one of the move into its status (transitions.transition).
        statuses = tuple(QuotaRequest.Status.values)
        audit_coverage(
            AuditCoverage(
                what="requests",
                event="request.draft event (of their creation)",
                target_type=QuotaRequest.__name__,
                actions=("request.draft",),
                rows=lambda: QuotaRequest.objects.values_list("id"),
                describe=lambda ids: [f"request #{pk}" for (pk,) in ids],
            )
        )
        audit_coverage(
            AuditCoverage(
                what="request states",
                event="request.<status> event (of the move into their status)",
                target_type=QuotaRequest.__name__,
                actions=tuple(f"request.{status}" for status in statuses),
                rows=lambda: QuotaRequest.objects.values_list("id", "status"),
                after_key="status",
                value_field=CharField(),
                describe=lambda pairs: [f"request #{pk} ({status})" for pk, status in pairs],
            )
        )
        # Each comment of a discussion has its request.comment event, holding its text.
        audit_coverage(
            AuditCoverage(
                what="request comments",
                event="request.comment event",
                target_type=QuotaRequest.__name__,
                actions=("request.comment",),
                rows=lambda: RequestComment.objects.values_list("request_id", "id"),
                after_key="comment",
                value_field=IntegerField(),
                describe=lambda pairs: [f"comment #{c} on request #{r}" for r, c in pairs],
            )
        )
