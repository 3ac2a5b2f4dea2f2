"""Reactions of approvals to what quotas reports."""

from approvals.lifecycle import requests_follow_syncs
from approvals.models import QuotaRequest


def follow_finished_sync(*, request_ids: list[int], **_kwargs) -> None:
    """A sync finished: move the quota requests waiting for it to applied or failed."""
    waiting = QuotaRequest.objects.filter(sync_requests__in=request_ids).values_list(
        "pk", flat=True
    )
    ids = list(waiting.distinct())
    if ids:
        requests_follow_syncs(request_ids=ids)
