"""Quota requests made through the services (a running temporary grant too), and the
new-request form's POST data."""

from datetime import timedelta

from django.utils import timezone

from approvals.lifecycle import (
    request_approve,
    request_create,
    request_submit,
    requests_follow_syncs,
)
from approvals.lines import LineInput
from approvals.models import QuotaRequest
from quotas.models import SyncRequest


def new_request(user, ns, gpu, guarantee, cap, *, kind="permanent", ends_in=None, **kwargs):
    return request_create(
        team=ns.team,
        acting_user=user,
        justification="more training runs",
        lines=[LineInput(ns.pk, gpu.pk, guarantee, cap, kwargs.get("per_pod_max"))],
        kind=kind,
        starts_at=kwargs.get("starts_at"),
        ends_at=timezone.now() + ends_in if ends_in else None,
    )


def line_data(ns, gpu, guarantee, cap, *, per_pod_max="", total=3, **extra) -> dict:
    """POST data of the new-request form with one filled line and empty rows after it."""
    data = {
        "lines-TOTAL_FORMS": str(total),
        "lines-INITIAL_FORMS": "0",
        "lines-MIN_NUM_FORMS": "0",
        "lines-MAX_NUM_FORMS": "1000",
        "lines-0-team_namespace": str(ns.pk),
        "lines-0-resource": str(gpu.pk),
        "lines-0-guarantee": str(guarantee),
        "lines-0-cap": str(cap),
        "lines-0-per_pod_max": str(per_pod_max),
        "team": str(ns.team_id),
        "justification": "more training runs",
        "kind": "permanent",
        "starts_at": "",
        "ends_at": "",
    }
    data.update(extra)
    return data


def running_grant(lead, ns, gpu, admin, *, guarantee=3, cap=6, hours=30) -> QuotaRequest:
    """A temporary grant approved, applied and started (its syncs done)."""
    grant = new_request(
        lead, ns, gpu, guarantee, cap, kind="temporary", ends_in=timedelta(hours=hours)
    )
    request_submit(request=grant, acting_user=lead)
    request_approve(request=grant, acting_user=admin)
    grant.sync_requests.update(status=SyncRequest.Status.DONE)
    requests_follow_syncs(request_ids=[grant.pk])
    grant.refresh_from_db()
    assert grant.status == QuotaRequest.Status.ACTIVE
    return grant
