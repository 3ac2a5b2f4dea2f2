"""Whole numbers for GPUs, MIG slices and HAMi vGPU amounts: Kubernetes and Volcano refuse
fractions of extended resources (6.5 GPUs became `deserved: 6500m`). Refused in the models,
the services, the plan rules, the API and the form, naming the field; cpu may stay fractional."""

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from approvals.lifecycle import request_approve, request_submit
from approvals.lines import Decision
from common.errors import ValidationFailed
from quotas.models import Allocation, ClusterCapacity, Resource
from quotas.rules import RULE_WHOLE_UNITS, AllocationFacts, check_plan
from quotas.selectors import cluster_facts
from quotas.services import allocation_set
from tests.support.api import as_user, body
from tests.support.requests import line_data, new_request

pytestmark = pytest.mark.django_db

MESSAGE = "guarantee must be a whole number of nvidia.com/gpu, got 6.5"


@pytest.fixture
def cpu(db, cluster):
    resource = Resource.objects.create(name="cpu", display_name="CPU", kind="cpu", unit="core")
    ClusterCapacity.objects.create(cluster=cluster, resource=resource, capacity=Decimal(64))
    return resource


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        (Resource.Kind.GPU, "example.com/card"),
        (Resource.Kind.MIG, "nvidia.com/mig-1g.10gb"),
        (Resource.Kind.VGPU_MEMORY, "nvidia.com/gpumem"),  # HAMi: MiB
        (Resource.Kind.VGPU_CORES, "nvidia.com/gpucores"),  # HAMi: percent of a card
    ],
)
def test_gpu_mig_and_vgpu_kinds_are_whole(kind, name):
    assert Resource(name=name, kind=kind).whole_units


def test_cpu_and_memory_may_be_fractional():
    assert not Resource(name="cpu", kind=Resource.Kind.CPU).whole_units
    assert not Resource(name="memory", kind=Resource.Kind.MEMORY).whole_units


def test_service_refuses_a_fractional_gpu_naming_the_field(plan, lead_c, gpu):
    with pytest.raises(ValidationFailed) as refused:
        new_request(lead_c, plan["team-c"], gpu, Decimal("6.5"), 8)
    assert refused.value.field == "lines[0].guarantee"
    assert refused.value.message == f"lines[0].guarantee: {MESSAGE} (team-c-dev nvidia.com/gpu)"


def test_service_keeps_fractional_cpu(plan, lead_c, cpu):
    request = new_request(lead_c, plan["team-c"], cpu, Decimal("0.5"), Decimal("1.5"))
    assert request.lines.get().requested_cap == Decimal("1.5")


def test_decision_with_a_fractional_gpu_is_refused(plan, lead_c, gpu, admin, strict_policy):
    request = new_request(lead_c, plan["team-c"], gpu, 3, 6)
    request_submit(request=request, acting_user=lead_c)
    line = request.lines.get()
    with pytest.raises(ValidationFailed) as refused:
        request_approve(
            request=request, acting_user=admin, decisions=[Decision(line.pk, 3, Decimal("5.5"))]
        )
    assert refused.value.field == "decisions[0].cap"
    assert "cap must be a whole number of nvidia.com/gpu, got 5.5" in refused.value.message


def test_allocation_set_refuses_a_fractional_per_pod_max(ns_a, gpu, admin):
    with pytest.raises(ValidationFailed, match="per_pod_max must be a whole number"):
        allocation_set(
            team_namespace=ns_a,
            resource=gpu,
            guarantee=2,
            cap=4,
            per_pod_max=Decimal("1.5"),
            acting_user=admin,
        )


def test_model_validation_of_allocations_and_capacities(ns_a, gpu, cluster):
    allocation = Allocation(team_namespace=ns_a, resource=gpu, guarantee=Decimal("6.5"), cap=8)
    with pytest.raises(ValidationError) as refused:
        allocation.full_clean()
    assert refused.value.message_dict["guarantee"] == [MESSAGE]
    capacity = ClusterCapacity.objects.get(cluster=cluster, resource=gpu)
    capacity.capacity = Decimal("15.5")
    with pytest.raises(ValidationError) as refused:
        capacity.full_clean()
    assert refused.value.message_dict["capacity"] == [
        "capacity must be a whole number of nvidia.com/gpu, got 15.5"
    ]


def test_plan_rules_flag_a_fractional_gpu(cluster, gpu):
    facts = cluster_facts(cluster)
    assert facts.whole_resources == frozenset({"nvidia.com/gpu"})
    findings = check_plan(
        cluster=facts,
        allocations=[
            AllocationFacts(
                cluster="demo",
                namespace="team-a",
                resource="nvidia.com/gpu",
                guarantee=Decimal("6.5"),
                cap=Decimal(8),
            )
        ],
    )
    (finding,) = [f for f in findings if f.rule == RULE_WHOLE_UNITS]
    assert (finding.level, finding.field) == ("error", "guarantee")
    assert finding.message.startswith(MESSAGE)


def test_api_refuses_6_5_gpus_naming_the_field(plan, lead_c):
    response = as_user(lead_c).post(
        "/api/v1/requests/", body(guarantee="6.5", cap="8"), format="json"
    )
    assert response.status_code == 400
    assert response.json()["extra"]["field"] == "lines[0].guarantee"
    assert MESSAGE in response.json()["message"]


def test_api_refuses_a_fractional_decision(plan, lead_c, admin, strict_policy):
    created = as_user(lead_c).post("/api/v1/requests/", body(), format="json").json()
    response = as_user(admin).post(
        f"/api/v1/requests/{created['id']}/approve/",
        {"decisions": [{"line": created["lines"][0]["id"], "guarantee": "2.5", "cap": "6"}]},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["extra"]["field"] == "decisions[0].guarantee"


def test_form_shows_the_error_at_the_field(client, plan, lead_c, gpu):
    client.force_login(lead_c)
    response = client.post("/requests/new/", line_data(plan["team-c"], gpu, "6.5", 8))
    assert response.status_code == 400
    errors = response.context["formset"].forms[0].errors
    assert errors["guarantee"] == [f"Line 1, guarantee: {MESSAGE} (team-c-dev nvidia.com/gpu)"]


def test_admin_form_on_the_page_refuses_a_fractional_decision(
    client, plan, lead_c, gpu, admin, strict_policy
):
    request = new_request(lead_c, plan["team-c"], gpu, 3, 6)
    request_submit(request=request, acting_user=lead_c)
    line = request.lines.get()
    client.force_login(admin)
    response = client.post(f"/requests/{request.pk}/approve/", {f"decided-{line.pk}-cap": "5.5"})
    assert response.status_code == 400
    assert "cap must be a whole number of nvidia.com/gpu, got 5.5" in response.content.decode()
