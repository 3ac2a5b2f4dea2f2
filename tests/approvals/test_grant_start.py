"""A scheduled grant starting after its allocation changed: no lost update.

The grant was approved as a change of the allocation at one version. A permanent change
applied before its start must survive both the start (the grant applies on top of it) and
the end (the grant restores the allocation as it was at its start, not at its approval); a
grant that no longer holds on top does not start, and the team is told why.
"""

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone
from rest_framework.test import APIClient

from approvals.grants import requests_expire_due, requests_start_due
from approvals.lifecycle import request_approve, request_create, request_submit
from approvals.lines import LineInput
from approvals.models import QuotaRequest
from portal.celery import app
from quotas.models import Allocation, AuditEvent
from quotas.services import allocation_set
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db
S = QuotaRequest.Status


@pytest.fixture
def eager_tasks(monkeypatch):
    """Notification tasks run inline (their mail lands in the outbox); syncs are recorded."""
    from quotas import tasks

    monkeypatch.setattr(tasks.sync_cluster, "delay", lambda *args: None)
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


def scheduled_grant(lead, ns, gpu, admin, guarantee, cap, **kwargs) -> QuotaRequest:
    starts = timezone.now() + timedelta(hours=2)
    grant = new_request(
        lead,
        ns,
        gpu,
        guarantee,
        cap,
        kind="temporary",
        starts_at=starts,
        ends_in=timedelta(hours=8),
        **kwargs,
    )
    request_submit(request=grant, acting_user=lead)
    request_approve(request=grant, acting_user=admin)
    grant.refresh_from_db()
    assert grant.status == S.APPROVED
    return grant


def values(ns) -> tuple:
    a = Allocation.objects.get(team_namespace=ns)
    return a.guarantee, a.cap, a.per_pod_max


def test_a_grant_starts_on_top_of_a_change_made_after_its_approval_and_restores_it(
    plan, lead_c, gpu, admin, strict_policy
):
    ns = plan["team-c"]
    grant = scheduled_grant(lead_c, ns, gpu, admin, 3, 5)  # 2/4 → +1 / +1 for six hours
    # Meanwhile a permanent change of the same allocation is applied: cap 4 → 6.
    allocation_set(team_namespace=ns, resource=gpu, guarantee=2, cap=6, acting_user=admin)

    assert requests_start_due(now=grant.starts_at + timedelta(minutes=1)) == [grant.pk]
    grant.refresh_from_db()
    assert grant.status == S.APPLYING
    # Without the check the grant wrote 3/5 and took the new cap back to 5.
    assert values(ns)[:2] == (3, 7)
    line = grant.lines.get()
    assert (line.current_guarantee, line.current_cap) == (2, 6)
    assert (line.requested_guarantee, line.requested_cap) == (3, 5)  # what was asked stays
    event = AuditEvent.objects.get(action="request.rebased", target_id=str(grant.pk))
    assert "applies on top" in event.comment and event.actor is None

    QuotaRequest.objects.filter(pk=grant.pk).update(status=S.ACTIVE)
    requests_expire_due(now=grant.ends_at + timedelta(seconds=1))
    assert values(ns)[:2] == (2, 6)  # the permanent change survives the end of the grant


def test_a_grant_on_an_unchanged_allocation_starts_as_approved(
    plan, lead_c, gpu, admin, strict_policy
):
    ns = plan["team-c"]
    grant = scheduled_grant(lead_c, ns, gpu, admin, 3, 5)
    requests_start_due(now=grant.starts_at + timedelta(minutes=1))
    assert values(ns)[:2] == (3, 5)
    assert not AuditEvent.objects.filter(action="request.rebased").exists()


def test_a_grant_that_no_longer_fits_on_top_does_not_start_and_is_told(
    plan, lead_c, gpu, admin, strict_policy, eager_tasks, django_capture_on_commit_callbacks
):
    ns = plan["team-c"]
    lead_c.email = "lead-c@example.com"
    lead_c.save()
    grant = scheduled_grant(lead_c, ns, gpu, admin, 4, 6)  # +2 / +2
    # A permanent 6/6 lands meanwhile: 6 + 4 + 6 = 16 guaranteed; +2 on top would be 18.
    allocation_set(team_namespace=ns, resource=gpu, guarantee=6, cap=6, acting_user=admin)
    mail.outbox.clear()

    with django_capture_on_commit_callbacks(execute=True):
        requests_start_due(now=grant.starts_at + timedelta(minutes=1))
    grant.refresh_from_db()
    assert grant.status == S.FAILED
    [reason] = [f["message"] for f in grant.findings if f["rule"] == "grant_start"]
    assert reason.startswith("the grant did not start:")
    assert "above its capacity 16" in reason
    event = AuditEvent.objects.get(action="request.failed", target_id=str(grant.pk))
    assert (event.actor, event.before, event.comment) == (None, {"status": "approved"}, reason)
    assert values(ns)[:2] == (6, 6)  # nothing applied, nothing synced
    assert not grant.sync_requests.exists()
    subject = f"[GPU quota] request #{grant.pk} failed to apply (team-c)"
    assert [m.subject for m in mail.outbox] == [subject]
    assert "did not start" in mail.outbox[0].body
    # It is never started later behind the admins' backs.
    assert requests_start_due(now=grant.starts_at + timedelta(hours=1)) == []

    # What the team sees through the API.
    api = APIClient()
    api.force_authenticate(lead_c)
    shown = api.get(f"/api/v1/requests/{grant.pk}/").json()
    assert shown["status"] == "failed"
    assert shown["findings"][0]["message"] == reason


def test_a_per_pod_max_both_changed_differently_is_a_conflict(
    plan, lead_c, gpu, admin, strict_policy
):
    ns = plan["team-c"]
    allocation_set(
        team_namespace=ns, resource=gpu, guarantee=2, cap=4, per_pod_max=1, acting_user=admin
    )
    grant = scheduled_grant(lead_c, ns, gpu, admin, 2, 4, per_pod_max=2)
    allocation_set(
        team_namespace=ns, resource=gpu, guarantee=2, cap=4, per_pod_max=3, acting_user=admin
    )
    requests_start_due(now=grant.starts_at + timedelta(minutes=1))
    grant.refresh_from_db()
    assert grant.status == S.FAILED
    assert "team-c-dev nvidia.com/gpu per-pod max: the grant sets 2" in grant.findings[0]["message"]
    assert values(ns) == (2, 4, 3)


def test_a_per_pod_max_only_the_grant_changes_is_applied_on_top(
    plan, lead_c, gpu, admin, strict_policy
):
    ns = plan["team-c"]
    grant = request_create(
        team=ns.team,
        acting_user=lead_c,
        justification="a large evaluation for a day",
        lines=[LineInput(ns.pk, gpu.pk, 3, 5, per_pod_max=2)],
        kind="temporary",
        starts_at=timezone.now() + timedelta(hours=2),
        ends_at=timezone.now() + timedelta(hours=8),
        submit=True,
    )
    request_approve(request=grant, acting_user=admin)
    allocation_set(team_namespace=ns, resource=gpu, guarantee=3, cap=4, acting_user=admin)
    requests_start_due(now=grant.starts_at + timedelta(minutes=1))
    grant.refresh_from_db()
    assert grant.status == S.APPLYING
    assert values(ns) == (4, 5, 2)


# --- a start in the past is refused (clock skew aside) ----------------------------------------


def grant_body(starts_at: str) -> dict:
    return {
        "team": "team-c",
        "justification": "a deadline",
        "kind": "temporary",
        "starts_at": starts_at,
        "ends_at": (timezone.now() + timedelta(days=2)).isoformat(),
        "lines": [
            {
                "namespace": "team-c-dev",
                "cluster": "demo",
                "resource": "nvidia.com/gpu",
                "guarantee": "3",
                "cap": "4",
            }
        ],
        "submit": True,
    }


BACKDATED = ["0001-01-01T00:00:00Z", "1970-01-01T00:00:00Z"]


@pytest.mark.parametrize("starts_at", BACKDATED)
@pytest.mark.parametrize("path", ["/api/v1/requests/", "/api/v1/requests/preview/"])
def test_the_api_refuses_a_backdated_start_naming_the_field(plan, lead_c, path, starts_at):
    api = APIClient()
    api.force_authenticate(lead_c)
    response = api.post(path, grant_body(starts_at), format="json")
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["extra"]["field"] == "starts_at"
    assert "starts_at: a start may lie at most 5 minutes in the past" in body["message"]
    assert not QuotaRequest.objects.exists()
    assert values(plan["team-c"]) == (2, 4, None)


def test_a_start_before_year_one_in_utc_is_a_400_too(plan, lead_c):
    api = APIClient()
    api.force_authenticate(lead_c)
    response = api.post("/api/v1/requests/", grant_body("0001-01-01T00:00:00+08:00"), format="json")
    assert response.status_code == 400, response.content
    assert response.json()["extra"]["field"] == "starts_at"
    assert not QuotaRequest.objects.exists()


@pytest.mark.parametrize("starts_at", ["0001-01-01T00:00", "1970-01-01T00:00"])
def test_the_form_refuses_a_backdated_start_at_the_field(client, plan, lead_c, gpu, starts_at):
    from tests.support.requests import line_data

    client.force_login(lead_c)
    data = line_data(
        plan["team-c"],
        gpu,
        3,
        4,
        action="submit",
        kind="temporary",
        starts_at=starts_at,
        ends_at=(timezone.now() + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M"),
    )
    response = client.post("/requests/new/", data)
    assert response.status_code == 400
    page = response.content.decode()
    assert "starts_at: a start may lie at most 5 minutes in the past" in page
    assert 'data-testid="error-starts_at"' in page
    assert not QuotaRequest.objects.exists()


def test_a_start_within_the_clock_skew_is_taken_and_the_grant_applies_at_once(
    plan, lead_c, gpu, admin, strict_policy
):
    from approvals.lifecycle import GRANT_START_CLOCK_SKEW
    from common.errors import ValidationFailed

    ns = plan["team-c"]
    with pytest.raises(ValidationFailed) as refused:
        new_request(
            lead_c,
            ns,
            gpu,
            3,
            4,
            kind="temporary",
            starts_at=timezone.now() - GRANT_START_CLOCK_SKEW - timedelta(seconds=30),
            ends_in=timedelta(hours=8),
        )
    assert refused.value.field == "starts_at"
    slightly_behind = timezone.now() - GRANT_START_CLOCK_SKEW + timedelta(seconds=30)
    grant = new_request(
        lead_c,
        ns,
        gpu,
        3,
        4,
        kind="temporary",
        starts_at=slightly_behind,
        ends_in=timedelta(hours=8),
    )
    request_submit(request=grant, acting_user=lead_c)
    request_approve(request=grant, acting_user=admin)
    grant.refresh_from_db()
    assert grant.status == S.APPLYING and values(ns)[:2] == (3, 4)
