"""Auto-approval cannot be walked up: a budget per team, cluster and period; an auto-approval
never makes a request waiting for an admin impossible to approve; and the admin queue shows
waiting requests that no longer fit, with the reason (page and API alike)."""

import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.lifecycle import request_create, request_submit
from approvals.lines import LineInput
from approvals.models import ApprovalPolicy, QuotaRequest
from quotas.models import Allocation, AuditEvent, TeamMembership, TeamNamespace
from quotas.services import allocation_set
from tests.support.api import as_user
from tests.support.people import make_user
from tests.support.requests import new_request

S = QuotaRequest.Status


@pytest.fixture
def lead_b(plan):
    user = make_user("lead-b")
    TeamMembership.objects.create(
        team=plan["team-b"].team, user=user, role=TeamMembership.Role.LEAD
    )
    return user


@pytest.fixture
def lead_a(plan):
    user = make_user("lead-a")
    TeamMembership.objects.create(
        team=plan["team-a"].team, user=user, role=TeamMembership.Role.LEAD
    )
    return user


def step(user, ns, gpu, guarantee, cap) -> QuotaRequest:
    request = new_request(user, ns, gpu, guarantee, cap)
    request_submit(request=request, acting_user=user)
    request.refresh_from_db()
    return request


def policy_reason(request: QuotaRequest) -> str:
    return AuditEvent.objects.get(
        target_type="QuotaRequest", target_id=str(request.pk), action="request.submitted"
    ).after["policy"]


def guarantee_of(ns, gpu) -> Decimal:
    return Allocation.objects.get(team_namespace=ns, resource=gpu).guarantee


# --- the budget ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_small_steps_stop_at_the_budget(plan, lead_b, gpu):
    ns = plan["team-b"]  # 4/6, default policy: steps of 1, 2 per 30 days
    assert step(lead_b, ns, gpu, 5, 7).auto_approved
    assert step(lead_b, ns, gpu, 6, 8).auto_approved
    third = step(lead_b, ns, gpu, 7, 8)
    assert third.status == S.SUBMITTED and not third.auto_approved
    assert "auto-approval budget of team-b on demo is 2 per 30 days" in policy_reason(third)
    assert guarantee_of(ns, gpu) == 6


@pytest.mark.django_db
def test_the_request_page_says_why_it_waits(client, plan, lead_b, gpu):
    ns = plan["team-b"]
    step(lead_b, ns, gpu, 5, 7)
    step(lead_b, ns, gpu, 6, 8)
    third = step(lead_b, ns, gpu, 7, 8)
    client.force_login(lead_b)
    page = client.get(f"/requests/{third.pk}/").content.decode()
    assert 'data-testid="policy-reason">the auto-approval budget of team-b on demo' in page


@pytest.mark.django_db
def test_decreases_stay_automatic_past_the_budget(plan, lead_b, gpu):
    ns = plan["team-b"]
    step(lead_b, ns, gpu, 5, 7)
    step(lead_b, ns, gpu, 6, 8)
    assert step(lead_b, ns, gpu, 5, 7).auto_approved


@pytest.mark.django_db
def test_budget_and_period_are_configurable(plan, lead_b, gpu, cluster):
    ApprovalPolicy.objects.create(
        cluster=cluster, auto_approve_budget=Decimal(1), auto_approve_period_days=7
    )
    ns = plan["team-b"]
    first = step(lead_b, ns, gpu, 5, 7)
    assert first.auto_approved
    assert "is 1 per 7 days" in policy_reason(step(lead_b, ns, gpu, 6, 7))
    # Once the auto-approval is older than the period, the budget is free again.
    QuotaRequest.objects.filter(pk=first.pk).update(decided_at=first.decided_at - timedelta(days=8))
    assert step(lead_b, ns, gpu, 5, 8).auto_approved


@pytest.mark.django_db
def test_api_walking_up_waits_for_an_admin_with_the_reason(plan, lead_b, gpu):
    client = as_user(lead_b)
    statuses, reasons = [], []
    for guarantee, cap in ((5, 7), (6, 8), (7, 8), (8, 8)):
        response = client.post(
            "/api/v1/requests/",
            {
                "team": "team-b",
                "justification": "one more",
                "submit": True,
                "lines": [
                    {
                        "namespace": "team-b-inference",
                        "cluster": "demo",
                        "resource": "nvidia.com/gpu",
                        "guarantee": str(guarantee),
                        "cap": str(cap),
                    }
                ],
            },
            format="json",
        )
        assert response.status_code == 201, response.content
        statuses.append(response.json()["status"])
        reasons.append(response.json()["policy_reason"])
    assert statuses[:2] == ["applying", "applying"]
    assert statuses[2] == "submitted"
    assert "auto-approval budget of team-b on demo is 2 per 30 days" in reasons[2]
    assert guarantee_of(plan["team-b"], gpu) == 6


# --- requests waiting for an admin --------------------------------------------------------------


@pytest.fixture
def waiting(plan, lead_a, gpu):
    """team-a asks for 10 guaranteed (+4, an admin decides): exactly the free capacity."""
    return step(lead_a, plan["team-a"], gpu, 10, 10)


@pytest.mark.django_db
def test_an_auto_approval_that_would_starve_a_waiting_request_waits(waiting, plan, lead_c, gpu):
    assert waiting.status == S.SUBMITTED
    small = step(lead_c, plan["team-c"], gpu, 3, 4)  # +1: automatic, were it not for #waiting
    assert small.status == S.SUBMITTED and not small.auto_approved
    reason = policy_reason(small)
    assert f"request #{waiting.pk} (waiting for an admin) unable to fit" in reason
    assert "would sum to 17" in reason
    assert guarantee_of(plan["team-c"], gpu) == 2


@pytest.mark.django_db
def test_an_auto_approval_that_leaves_room_goes_through(plan, lead_a, lead_c, gpu):
    step(lead_a, plan["team-a"], gpu, 9, 10)  # waits; leaves one GPU
    assert step(lead_c, plan["team-c"], gpu, 3, 4).auto_approved


@pytest.fixture
def no_longer_fits(waiting, plan, gpu, admin):
    # Another change takes a GPU after team-a's request was submitted.
    allocation_set(
        team_namespace=plan["team-b"], resource=gpu, guarantee=5, cap=6, acting_user=admin
    )
    return waiting


@pytest.mark.django_db
def test_admin_list_and_page_show_that_it_no_longer_fits(client, no_longer_fits, admin):
    client.force_login(admin)
    listing = client.get("/requests/?waiting=on").content.decode()
    assert f'data-testid="does-not-fit-{no_longer_fits.pk}"' in listing
    assert "No longer fits the plan:</strong> guarantees on cluster demo would sum to 17" in (
        listing
    )

    page = client.get(f"/requests/{no_longer_fits.pk}/").content.decode()
    assert 'data-testid="does-not-fit"' in page
    assert 'data-testid="approve"' not in page
    assert 'data-testid="approve-modified"' in page


@pytest.mark.django_db
def test_a_fitting_request_shows_the_plain_approve_button(client, waiting, admin):
    client.force_login(admin)
    page = client.get(f"/requests/{waiting.pk}/").content.decode()
    assert 'data-testid="approve"' in page
    assert 'data-testid="does-not-fit"' not in page


@pytest.mark.django_db
def test_admin_page_approves_modified_values_that_fit(client, no_longer_fits, admin):
    line = no_longer_fits.lines.get()
    client.force_login(admin)
    response = client.post(
        f"/requests/{no_longer_fits.pk}/approve/",
        {f"decided-{line.pk}-guarantee": "9", f"decided-{line.pk}-cap": "10"},
    )
    assert response.status_code == 302
    no_longer_fits.refresh_from_db()
    assert no_longer_fits.status == S.APPLYING


@pytest.mark.django_db
def test_api_list_and_detail_say_whether_it_fits(no_longer_fits, admin, plan):
    client = as_user(admin)
    (row,) = [r for r in client.get("/api/v1/requests/").json()["results"]]
    assert row["fits_plan"]["fits"] is False
    (problem,) = row["fits_plan"]["problems"]
    assert problem["rule"] == "guarantees_le_capacity"
    assert "would sum to 17" in problem["message"]
    detail = client.get(f"/api/v1/requests/{no_longer_fits.pk}/").json()
    assert detail["fits_plan"] == row["fits_plan"]


@pytest.mark.django_db
def test_api_fits_plan_is_true_while_it_fits_and_null_once_decided(waiting, admin):
    client = as_user(admin)
    assert client.get(f"/api/v1/requests/{waiting.pk}/").json()["fits_plan"] == {
        "fits": True,
        "problems": [],
    }
    approved = client.post(f"/api/v1/requests/{waiting.pk}/approve/", {}, format="json")
    assert approved.json()["fits_plan"] is None


@pytest.mark.django_db
def test_fit_is_read_once_per_page_not_per_row(client, plan, gpu, admin, lead_c, strict_policy):
    def submit_more(count: int) -> None:
        for _ in range(count):
            request = request_create(
                team=plan["team-c"].team,
                acting_user=lead_c,
                justification="x",
                lines=[LineInput(plan["team-c"].pk, gpu.pk, 3, 4)],
            )
            request_submit(request=request, acting_user=lead_c)

    def queries(path: str) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(path).status_code == 200
        return len(captured)

    client.force_login(admin)
    api = as_user(admin)
    submit_more(2)
    api.get("/api/v1/requests/")  # the token's last use is written once, not per call
    page_few = queries("/requests/")
    with CaptureQueriesContext(connection) as api_few:
        api.get("/api/v1/requests/")
    submit_more(6)
    assert queries("/requests/") == page_few
    with CaptureQueriesContext(connection) as api_many:
        api.get("/api/v1/requests/")
    assert len(api_many) == len(api_few)


# --- race: two small steps submitted at once share one budget ------------------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_small_steps_share_one_budget(plan, gpu, lead_b, cluster, admin):
    ApprovalPolicy.objects.create(cluster=cluster, auto_approve_budget=Decimal(1))
    second_ns = TeamNamespace.objects.create(
        team=plan["team-b"].team, cluster=cluster, name="team-b-dev"
    )
    allocation_set(team_namespace=second_ns, resource=gpu, guarantee=0, cap=2, acting_user=admin)
    drafts = [
        new_request(lead_b, plan["team-b"], gpu, 5, 6),
        new_request(lead_b, second_ns, gpu, 1, 2),
    ]
    barrier = threading.Barrier(len(drafts))

    def submit(request: QuotaRequest) -> None:
        barrier.wait()
        try:
            request_submit(request=request, acting_user=lead_b)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit, args=(draft,)) for draft in drafts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    decided = [QuotaRequest.objects.get(pk=d.pk) for d in drafts]
    assert sorted(r.auto_approved for r in decided) == [False, True]
    assert sorted(r.status for r in decided) == [S.APPLYING, S.SUBMITTED]
