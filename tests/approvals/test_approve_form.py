"""The approve form on the request page decides what the API's decisions decide: amounts, a
per-pod max or its removal, and the set of priority classes or no restriction at all."""

import pytest
from rest_framework.test import APIClient

from approvals.lifecycle import request_create
from approvals.lines import LineInput
from approvals.models import QuotaRequest
from quotas.models import Allocation, PriorityClass
from quotas.services import allocation_set

pytestmark = pytest.mark.django_db
S = QuotaRequest.Status


@pytest.fixture
def classes(db):
    PriorityClass.objects.create(name="production-inference", value=100000)
    PriorityClass.objects.create(name="experiment", value=100)


@pytest.fixture
def restricted(plan, gpu, admin, classes, strict_policy):
    """team-c-dev 2/4, pods of at most 2 GPUs, only the experiment class. One admin decides
    here, also a higher class (two admins for it are tested in test_policy_fields)."""
    strict_policy.two_admins_for_higher_class = False
    strict_policy.save()
    return allocation_set(
        team_namespace=plan["team-c"],
        resource=gpu,
        guarantee=2,
        cap=4,
        per_pod_max=2,
        priority_classes=["experiment"],
        acting_user=admin,
    )


def submitted(lead_c, ns, gpu) -> QuotaRequest:
    return request_create(
        team=ns.team,
        acting_user=lead_c,
        justification="bigger evaluation pods",
        lines=[LineInput(ns.pk, gpu.pk, 3, 4)],
        submit=True,
    )


def test_the_form_removes_the_per_pod_max_and_sets_the_classes(
    client, plan, lead_c, gpu, admin, restricted, strict_policy
):
    request = submitted(lead_c, plan["team-c"], gpu)
    line = request.lines.get()
    client.force_login(admin)
    page = client.get(f"/requests/{request.pk}/").content.decode()
    assert f'name="decided-{line.pk}-remove_per_pod_max"' in page
    assert f'name="decided-{line.pk}-priority_classes"' in page
    assert f'name="decided-{line.pk}-any_priority_class"' in page
    assert page.count('<option value="experiment"') == 1

    response = client.post(
        f"/requests/{request.pk}/approve/",
        {
            f"decided-{line.pk}-remove_per_pod_max": "on",
            f"decided-{line.pk}-priority_classes": ["experiment", "production-inference"],
        },
    )
    assert response.status_code == 302, response.content.decode()
    request.refresh_from_db()
    line.refresh_from_db()
    assert request.status == S.APPLYING
    assert (line.decided_guarantee, line.decided_cap, line.decided_per_pod_max) == (3, 4, None)
    assert line.decided_priority_classes == ["experiment", "production-inference"]
    allocation = Allocation.objects.get(team_namespace=plan["team-c"])
    assert allocation.per_pod_max is None
    assert allocation.priority_classes == ["experiment", "production-inference"]


def test_the_form_lifts_the_class_restriction(
    client, plan, lead_c, gpu, admin, restricted, strict_policy
):
    request = submitted(lead_c, plan["team-c"], gpu)
    line = request.lines.get()
    client.force_login(admin)
    response = client.post(
        f"/requests/{request.pk}/approve/", {f"decided-{line.pk}-any_priority_class": "on"}
    )
    assert response.status_code == 302
    allocation = Allocation.objects.get(team_namespace=plan["team-c"])
    assert (allocation.priority_classes, allocation.per_pod_max) == ([], 2)  # pod max kept


def test_the_form_refuses_a_value_and_its_removal_at_the_field(
    client, plan, lead_c, gpu, admin, restricted, strict_policy
):
    request = submitted(lead_c, plan["team-c"], gpu)
    line = request.lines.get()
    client.force_login(admin)
    response = client.post(
        f"/requests/{request.pk}/approve/",
        {
            f"decided-{line.pk}-per_pod_max": "3",
            f"decided-{line.pk}-remove_per_pod_max": "on",
            f"decided-{line.pk}-priority_classes": ["experiment"],
            f"decided-{line.pk}-any_priority_class": "on",
        },
    )
    assert response.status_code == 400
    form = response.context["approve_form"]
    assert form.errors[f"decided-{line.pk}-per_pod_max"] == [
        "give a per-pod max or tick remove per-pod max, not both"
    ]
    assert form.errors[f"decided-{line.pk}-priority_classes"] == [
        "choose classes or tick no class restriction, not both"
    ]
    request.refresh_from_db()
    assert request.status == S.SUBMITTED and not request.approvals.exists()


def test_a_class_the_service_refuses_is_shown_at_the_field(
    client, plan, lead_c, gpu, admin, restricted, strict_policy
):
    request = submitted(lead_c, plan["team-c"], gpu)
    line = request.lines.get()
    client.force_login(admin)
    PriorityClass.objects.filter(name="production-inference").delete()  # gone meanwhile
    response = client.post(
        f"/requests/{request.pk}/approve/",
        {f"decided-{line.pk}-priority_classes": ["production-inference"]},
    )
    assert response.status_code == 400
    # Offered no more: the form itself refuses the choice, naming the field.
    assert f"decided-{line.pk}-priority_classes" in response.context["approve_form"].errors


def test_form_and_api_decide_the_same(client, plan, lead_c, gpu, admin, restricted, strict_policy):
    by_form = submitted(lead_c, plan["team-c"], gpu)
    form_line = by_form.lines.get()
    client.force_login(admin)
    client.post(
        f"/requests/{by_form.pk}/approve/",
        {
            f"decided-{form_line.pk}-cap": "5",
            f"decided-{form_line.pk}-remove_per_pod_max": "on",
            f"decided-{form_line.pk}-priority_classes": ["production-inference"],
        },
    )
    form_line.refresh_from_db()
    # The same decision through the API, on the same allocation as it was.
    allocation_set(
        team_namespace=plan["team-c"],
        resource=gpu,
        guarantee=2,
        cap=4,
        per_pod_max=2,
        priority_classes=["experiment"],
        acting_user=admin,
    )
    by_api = submitted(lead_c, plan["team-c"], gpu)
    api_line = by_api.lines.get()
    api = APIClient()
    api.force_authenticate(admin)
    response = api.post(
        f"/api/v1/requests/{by_api.pk}/approve/",
        {
            "decisions": [
                {
                    "line": api_line.pk,
                    "guarantee": "3",
                    "cap": "5",
                    "per_pod_max": None,
                    "priority_classes": ["production-inference"],
                }
            ]
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    api_line.refresh_from_db()

    def decided(line):
        return (
            line.decided_guarantee,
            line.decided_cap,
            line.decided_per_pod_max,
            line.decided_priority_classes,
        )

    assert decided(form_line) == decided(api_line) == (3, 5, None, ["production-inference"])
