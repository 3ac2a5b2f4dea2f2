"""Many requests compete for the last GPUs and are approved from many threads at once.

On PostgreSQL (CI) this is real row locking: the capacity rows are locked first, then the
request, and the plan is validated again inside the lock. The sum of guarantees must never
exceed capacity, and every request must be decided exactly once.
"""

import threading
from decimal import Decimal

import pytest
from django.db import connection
from django.db.models import Sum

from approvals.lifecycle import request_approve, request_submit
from approvals.models import ApprovalPolicy, QuotaRequest
from common.errors import ApplicationError
from quotas.models import Allocation, Team, TeamMembership, TeamNamespace
from quotas.services import allocation_set
from tests.support.people import make_user
from tests.support.requests import new_request

COMPETITORS = 8


@pytest.mark.django_db(transaction=True)
def test_concurrent_approvals_never_overcommit_and_decide_each_request_once(
    cluster, gpu, admin, admin2
):
    ApprovalPolicy.objects.create(
        cluster=cluster, auto_approve_decreases=False, auto_approve_increase_max=0
    )
    # 12 of 16 GPUs are guaranteed already: room for 4 more.
    big = Team.objects.create(slug="big", name="Big")
    big_ns = TeamNamespace.objects.create(team=big, cluster=cluster, name="big-training")
    allocation_set(team_namespace=big_ns, resource=gpu, guarantee=8, cap=8, acting_user=admin)
    others = Team.objects.create(slug="others", name="Others")
    others_ns = TeamNamespace.objects.create(team=others, cluster=cluster, name="others-dev")
    allocation_set(team_namespace=others_ns, resource=gpu, guarantee=4, cap=4, acting_user=admin)

    requests = []
    for i in range(COMPETITORS):
        team = Team.objects.create(slug=f"t{i}", name=f"T{i}")
        ns = TeamNamespace.objects.create(team=team, cluster=cluster, name=f"t{i}-dev")
        allocation_set(team_namespace=ns, resource=gpu, guarantee=0, cap=2, acting_user=admin)
        lead = make_user(f"lead-{i}")
        TeamMembership.objects.create(team=team, user=lead, role=TeamMembership.Role.LEAD)
        request = new_request(lead, ns, gpu, 1, 2)
        request_submit(request=request, acting_user=lead)  # alone, each one fits
        requests.append(request)

    barrier = threading.Barrier(COMPETITORS * 2)
    outcomes: list[tuple[int, str]] = []
    lock = threading.Lock()

    def approve(request: QuotaRequest, approver) -> None:
        barrier.wait()
        try:
            request_approve(request=request, acting_user=approver, comment="race")
            result = "approved"
        except ApplicationError as exc:
            result = type(exc).__name__
        finally:
            connection.close()
        with lock:
            outcomes.append((request.pk, result))

    threads = [
        threading.Thread(target=approve, args=(request, approver))
        for request in requests
        for approver in (admin, admin2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    guaranteed = Allocation.objects.filter(team_namespace__cluster=cluster).aggregate(
        total=Sum("guarantee")
    )["total"]
    assert guaranteed <= Decimal(16), f"over-committed: {guaranteed} of 16 guaranteed"
    approved_ids = [pk for pk, result in outcomes if result == "approved"]
    assert len(approved_ids) == len(set(approved_ids)), "a request was approved twice"
    assert len(approved_ids) == 4, outcomes  # exactly the free capacity was handed out
    assert guaranteed == Decimal(16)
    for request in requests:
        request.refresh_from_db()
        if request.pk in approved_ids:
            assert request.status == QuotaRequest.Status.APPLYING
            assert request.approvals.count() == 1
        else:
            assert request.status == QuotaRequest.Status.SUBMITTED
            assert request.approvals.count() == 0
    refused = {result for _, result in outcomes if result != "approved"}
    assert refused <= {"ValidationFailed", "NotAllowed", "PermissionDenied"}
    assert len(outcomes) == COMPETITORS * 2
