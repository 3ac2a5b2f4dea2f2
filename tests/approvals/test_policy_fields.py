"""The policy sees every field of a line: priority classes and per-pod max are never waved
through as "only decreases", unknown classes are refused, and a field left out stays as it is
(through the service, the API and the request form)."""

from decimal import Decimal
from pathlib import Path

import pytest

from approvals.lifecycle import request_create, request_submit
from approvals.lines import LineInput
from approvals.models import QuotaRequest
from common.errors import ValidationFailed
from quotas.models import Allocation, PriorityClass
from quotas.services import allocation_set
from tests.support.api import as_user
from tests.support.requests import line_data

pytestmark = pytest.mark.django_db
S = QuotaRequest.Status


@pytest.fixture
def classes(db):
    for name, value, preempts in (
        ("production-inference", 100000, True),
        ("training", 10000, True),
        ("experiment", 1000, False),
    ):
        PriorityClass.objects.create(name=name, value=value, preempts=preempts)


@pytest.fixture
def team_c_dev(plan, gpu, admin, classes):
    """team-c-dev as in the demo: 2/4, pods of at most 2 GPUs, experiment class only."""
    ns = plan["team-c"]
    allocation_set(
        team_namespace=ns,
        resource=gpu,
        guarantee=2,
        cap=4,
        per_pod_max=2,
        priority_classes=["experiment"],
        acting_user=admin,
    )
    return ns


def submit(user, ns, gpu, line: LineInput) -> QuotaRequest:
    request = request_create(team=ns.team, acting_user=user, justification="test", lines=[line])
    request_submit(request=request, acting_user=user)
    request.refresh_from_db()
    return request


def allocation(ns, gpu) -> Allocation:
    return Allocation.objects.get(team_namespace=ns, resource=gpu)


# --- 1. the policy sees every field (service) --------------------------------------------------


def test_adding_a_higher_priority_class_waits_for_an_admin(team_c_dev, lead_c, gpu):
    request = submit(
        lead_c,
        team_c_dev,
        gpu,
        LineInput(
            team_c_dev.pk, gpu.pk, 2, 4, priority_classes=("production-inference", "experiment")
        ),
    )
    assert request.status == S.SUBMITTED
    assert not request.auto_approved
    assert allocation(team_c_dev, gpu).priority_classes == ["experiment"]
    event = request_submitted_event(request)
    assert "adds priority class production-inference" in event["policy"]
    assert "above experiment 1000" in event["policy"]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ({"per_pod_max": None}, "removes the per-pod max"),
        ({"per_pod_max": 3}, "raises the per-pod max from 2 to 3"),
        ({"priority_classes": ()}, "removes the priority-class restriction"),
        ({"priority_classes": ("experiment", "training")}, "adds priority class training"),
    ],
)
def test_widening_with_lower_amounts_is_not_only_decreases(team_c_dev, lead_c, gpu, line, reason):
    # Guarantee and cap go down, yet the line allows more than before: an admin decides.
    request = submit(lead_c, team_c_dev, gpu, LineInput(team_c_dev.pk, gpu.pk, 1, 3, **line))
    assert request.status == S.SUBMITTED
    assert reason in request_submitted_event(request)["policy"]
    assert allocation(team_c_dev, gpu).cap == 4


def test_narrowing_every_field_is_still_auto_approved(team_c_dev, lead_c, gpu):
    request = submit(
        lead_c,
        team_c_dev,
        gpu,
        LineInput(team_c_dev.pk, gpu.pk, 1, 3, per_pod_max=1, priority_classes=("experiment",)),
    )
    assert request.auto_approved
    assert allocation(team_c_dev, gpu).per_pod_max == 1


def test_unknown_priority_class_is_refused_naming_the_field(team_c_dev, lead_c, gpu):
    with pytest.raises(ValidationFailed) as refused:
        request_create(
            team=team_c_dev.team,
            acting_user=lead_c,
            justification="test",
            lines=[LineInput(team_c_dev.pk, gpu.pk, 2, 4, priority_classes=("gold",))],
        )
    assert refused.value.field == "lines[0].priority_classes"
    assert "unknown priority class 'gold'" in refused.value.message
    assert "production-inference, training, experiment" in refused.value.message


def request_submitted_event(request: QuotaRequest) -> dict:
    from quotas.models import AuditEvent

    event = AuditEvent.objects.get(
        target_type="QuotaRequest", target_id=str(request.pk), action="request.submitted"
    )
    return event.after


# --- 1. through the API ------------------------------------------------------------------------


def api_line(**line) -> dict:
    return {
        "team": "team-c",
        "justification": "evaluation",
        "submit": True,
        "lines": [
            {
                "namespace": "team-c-dev",
                "cluster": "demo",
                "resource": "nvidia.com/gpu",
                "guarantee": "2",
                "cap": "4",
                **line,
            }
        ],
    }


def test_api_preempting_class_for_an_experiment_team_is_not_auto_approved(team_c_dev, lead_c, gpu):
    response = as_user(lead_c).post(
        "/api/v1/requests/",
        api_line(priority_classes=["production-inference", "experiment"]),
        format="json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["status"] == "submitted"
    assert response.json()["auto_approved"] is False
    assert allocation(team_c_dev, gpu).priority_classes == ["experiment"]


def test_api_unknown_priority_class_is_400_and_creates_nothing_applied(team_c_dev, lead_c):
    response = as_user(lead_c).post(
        "/api/v1/requests/", api_line(priority_classes=["gold"]), format="json"
    )
    assert response.status_code == 400
    assert response.json()["extra"]["field"] == "lines[0].priority_classes"
    assert "unknown priority class 'gold'" in response.json()["message"]


def test_api_decision_with_an_unknown_class_is_400(team_c_dev, lead_c, admin, strict_policy):
    created = as_user(lead_c).post("/api/v1/requests/", api_line(cap="5"), format="json").json()
    response = as_user(admin).post(
        f"/api/v1/requests/{created['id']}/approve/",
        {
            "decisions": [
                {
                    "line": created["lines"][0]["id"],
                    "guarantee": "2",
                    "cap": "5",
                    "priority_classes": ["gold"],
                }
            ]
        },
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["extra"]["field"] == "decisions[0].priority_classes"


# --- 2. omitted means unchanged (service, API, form) -------------------------------------------


def test_service_line_without_per_pod_max_and_classes_keeps_them(team_c_dev, lead_c, gpu):
    request = submit(lead_c, team_c_dev, gpu, LineInput(team_c_dev.pk, gpu.pk, 2, 3))
    assert request.auto_approved  # a decrease of the cap only
    current = allocation(team_c_dev, gpu)
    assert (current.cap, current.per_pod_max, current.priority_classes) == (
        Decimal(3),
        Decimal(2),
        ["experiment"],
    )


def test_api_omitted_fields_stay_and_explicit_removal_waits_for_an_admin(team_c_dev, lead_c, gpu):
    client = as_user(lead_c)
    kept = client.post("/api/v1/requests/", api_line(cap="3"), format="json").json()
    assert kept["status"] == "applying"
    assert kept["lines"][0]["requested"]["per_pod_max"] == "2"
    assert kept["lines"][0]["requested"]["priority_classes"] == ["experiment"]
    assert allocation(team_c_dev, gpu).per_pod_max == 2

    removed = client.post(
        "/api/v1/requests/", api_line(cap="3", per_pod_max=None, priority_classes=[]), format="json"
    ).json()
    assert removed["status"] == "submitted"
    assert removed["lines"][0]["requested"]["per_pod_max"] is None
    assert removed["lines"][0]["requested"]["priority_classes"] == []
    assert allocation(team_c_dev, gpu).priority_classes == ["experiment"]


def test_api_decision_without_per_pod_max_keeps_the_requested_one(
    team_c_dev, lead_c, admin, strict_policy
):
    created = as_user(lead_c).post("/api/v1/requests/", api_line(cap="5"), format="json").json()
    response = as_user(admin).post(
        f"/api/v1/requests/{created['id']}/approve/",
        {"decisions": [{"line": created["lines"][0]["id"], "guarantee": "2", "cap": "4"}]},
        format="json",
    )
    assert response.status_code == 200, response.content
    decided = response.json()["lines"][0]["decided"]
    assert (decided["per_pod_max"], decided["priority_classes"]) == ("2", ["experiment"])


def form(ns, gpu, guarantee, cap, **extra) -> dict:
    return line_data(ns, gpu, guarantee, cap, total=1, action="submit", **extra)


def test_form_blank_per_pod_max_and_classes_keep_the_current_values(
    client, team_c_dev, lead_c, gpu
):
    client.force_login(lead_c)
    response = client.post("/requests/new/", form(team_c_dev, gpu, 2, 3))
    assert response.status_code == 302
    request = QuotaRequest.objects.get()
    assert request.auto_approved
    current = allocation(team_c_dev, gpu)
    assert (current.cap, current.per_pod_max, current.priority_classes) == (
        Decimal(3),
        Decimal(2),
        ["experiment"],
    )


def test_form_explicit_removal_is_a_widening(client, team_c_dev, lead_c, gpu):
    client.force_login(lead_c)
    data = form(
        team_c_dev,
        gpu,
        2,
        3,
        **{"lines-0-remove_per_pod_max": "on", "lines-0-any_priority_class": "on"},
    )
    response = client.post("/requests/new/", data)
    assert response.status_code == 302
    request = QuotaRequest.objects.get()
    assert request.status == S.SUBMITTED
    line = request.lines.get()
    assert (line.requested_per_pod_max, line.requested_priority_classes) == (None, [])
    assert allocation(team_c_dev, gpu).per_pod_max == 2


def test_form_value_and_removal_together_is_a_form_error(client, team_c_dev, lead_c, gpu):
    client.force_login(lead_c)
    data = form(team_c_dev, gpu, 2, 3, per_pod_max="1", **{"lines-0-remove_per_pod_max": "on"})
    response = client.post("/requests/new/", data)
    assert response.status_code == 400
    assert "not both" in response.content.decode()
    assert not QuotaRequest.objects.exists()


def test_form_unknown_priority_class_is_a_form_error(client, team_c_dev, lead_c, gpu):
    client.force_login(lead_c)
    response = client.post(
        "/requests/new/", form(team_c_dev, gpu, 2, 3, **{"lines-0-priority_classes": "gold"})
    )
    assert response.status_code == 400
    assert "gold is not one of the available choices" in response.content.decode()


def test_edit_page_shows_a_requested_removal_as_the_ticked_box(client, team_c_dev, lead_c, gpu):
    draft = request_create(
        team=team_c_dev.team,
        acting_user=lead_c,
        justification="test",
        lines=[LineInput(team_c_dev.pk, gpu.pk, 2, 4, per_pod_max=None)],
    )
    client.force_login(lead_c)
    page = client.get(f"/requests/{draft.pk}/edit/").content.decode()
    assert 'name="lines-0-remove_per_pod_max" id="id_lines-0-remove_per_pod_max" checked' in page
    assert 'name="lines-0-any_priority_class" id="id_lines-0-any_priority_class" checked' not in (
        page
    )


def test_new_form_carries_the_current_values_to_fill_in(client, team_c_dev, lead_c, gpu):
    client.force_login(lead_c)
    response = client.get("/requests/new/")
    current = response.context["current_values"]["current"][str(team_c_dev.pk)][str(gpu.pk)]
    assert current == {
        "guarantee": "2",
        "cap": "4",
        "per_pod_max": "2",
        "priority_classes": ["experiment"],
    }
    # Filled in, not a placeholder, by the form's script (a static file: the CSP allows no inline).
    assert 'src="/static/approvals/request-form.js"' in response.content.decode()
    script = Path(__file__).resolve().parents[2] / "static" / "approvals" / "request-form.js"
    assert "input.value = value" in script.read_text()


def test_a_class_the_allocation_has_but_the_portal_no_longer_knows_never_blocks(
    team_c_dev, lead_c, gpu
):
    PriorityClass.objects.filter(name="experiment").delete()
    kept = submit(lead_c, team_c_dev, gpu, LineInput(team_c_dev.pk, gpu.pk, 2, 3))
    assert kept.auto_approved
    named = LineInput(team_c_dev.pk, gpu.pk, 2, 3, priority_classes=("experiment",))
    assert submit(lead_c, team_c_dev, gpu, named).auto_approved
    with pytest.raises(ValidationFailed, match="unknown priority class 'gold'"):
        submit(
            lead_c,
            team_c_dev,
            gpu,
            LineInput(team_c_dev.pk, gpu.pk, 2, 3, priority_classes=("experiment", "gold")),
        )


# --- a class above every class the allocation allows: two admins (configurable) --------------


def test_api_a_higher_class_needs_two_admins(team_c_dev, lead_c, gpu, admin, admin2):
    response = as_user(lead_c).post(
        "/api/v1/requests/",
        api_line(priority_classes=["production-inference", "experiment"]),
        format="json",
    )
    assert response.status_code == 201, response.content
    created = response.json()
    assert (created["status"], created["approvals_needed"]) == ("submitted", 2)
    assert "lets the team preempt others, two admins must approve" in created["policy_reason"]
    first = as_user(admin).post(f"/api/v1/requests/{created['id']}/approve/", format="json")
    assert first.status_code == 200 and first.json()["status"] == "submitted"
    assert allocation(team_c_dev, gpu).priority_classes == ["experiment"]
    second = as_user(admin2).post(f"/api/v1/requests/{created['id']}/approve/", format="json")
    assert second.json()["status"] == "applying"
    assert allocation(team_c_dev, gpu).priority_classes == ["experiment", "production-inference"]


def test_with_the_policy_off_one_admin_allows_a_higher_class(team_c_dev, lead_c, gpu, cluster):
    from approvals.models import ApprovalPolicy

    ApprovalPolicy.objects.create(cluster=cluster, two_admins_for_higher_class=False)
    request = submit(
        lead_c,
        team_c_dev,
        gpu,
        LineInput(
            team_c_dev.pk, gpu.pk, 2, 4, priority_classes=("production-inference", "experiment")
        ),
    )
    assert (request.status, request.approvals_needed) == (S.SUBMITTED, 1)
    assert request.policy_reason.endswith("a platform admin must approve")


def test_a_higher_class_an_admin_decides_needs_a_second_admin(
    team_c_dev, lead_c, gpu, admin, admin2, strict_policy
):
    from approvals.lifecycle import request_approve
    from approvals.lines import Decision

    request = submit(lead_c, team_c_dev, gpu, LineInput(team_c_dev.pk, gpu.pk, 3, 4))
    assert request.approvals_needed == 1
    line = request.lines.get()
    request_approve(
        request=request,
        acting_user=admin,
        decisions=[Decision(line.pk, 3, 4, priority_classes=("experiment", "training"))],
    )
    request.refresh_from_db()
    assert (request.status, request.approvals_needed) == (S.SUBMITTED, 2)
    assert allocation(team_c_dev, gpu).guarantee == 2  # nothing applied on one approval
    request_approve(request=request, acting_user=admin2)
    request.refresh_from_db()
    assert request.status == S.APPLYING
    assert allocation(team_c_dev, gpu).priority_classes == ["experiment", "training"]


# --- a line for a resource the namespace has no allocation of yet: judged from nothing ---------


@pytest.fixture
def mig(team_c_dev, cluster):
    """MIG slices on the cluster; team-c-dev has no allocation of them yet."""
    from quotas.models import ClusterCapacity, Resource

    resource = Resource.objects.create(
        name="nvidia.com/mig-1g.10gb", display_name="1g.10gb", kind=Resource.Kind.MIG
    )
    ClusterCapacity.objects.create(cluster=cluster, resource=resource, capacity=14)
    return resource


def api_new_line(**line) -> dict:
    return api_line(resource="nvidia.com/mig-1g.10gb", guarantee="0", cap="1", **line)


@pytest.mark.parametrize(
    ("chosen", "said"),
    [
        (["production-inference"], "allows priority class production-inference (none allowed yet)"),
        ([], "allows every priority class, up to production-inference (none allowed yet)"),
        (None, "allows every priority class, up to production-inference (none allowed yet)"),
    ],
)
def test_api_a_new_line_allowing_a_higher_class_needs_two_admins(
    team_c_dev, mig, lead_c, admin, admin2, chosen, said
):
    line = {} if chosen is None else {"priority_classes": chosen}  # left out: no allocation
    response = as_user(lead_c).post("/api/v1/requests/", api_new_line(**line), format="json")
    assert response.status_code == 201, response.content
    created = response.json()
    # A cap of 1 is a small increase, but the namespace is allowed no class of it yet.
    assert (created["status"], created["auto_approved"], created["approvals_needed"]) == (
        "submitted",
        False,
        2,
    )
    assert said in created["policy_reason"]
    assert not Allocation.objects.filter(team_namespace=team_c_dev, resource=mig).exists()
    first = as_user(admin).post(f"/api/v1/requests/{created['id']}/approve/", format="json")
    assert first.json()["status"] == "submitted"
    assert not Allocation.objects.filter(team_namespace=team_c_dev, resource=mig).exists()
    second = as_user(admin2).post(f"/api/v1/requests/{created['id']}/approve/", format="json")
    assert second.json()["status"] == "applying"
    assert allocation(team_c_dev, mig).priority_classes == (chosen or [])


def test_a_new_line_with_the_lowest_class_waits_for_one_admin(team_c_dev, mig, lead_c):
    # A widening from nothing, but the lowest class lets the team preempt nobody.
    line = LineInput(team_c_dev.pk, mig.pk, 0, 1, priority_classes=("experiment",))
    request = submit(lead_c, team_c_dev, mig, line)
    assert (request.status, request.approvals_needed) == (S.SUBMITTED, 1)
    assert "allows priority class experiment (none allowed yet)" in request.policy_reason
    assert request.policy_reason.endswith("a platform admin must approve")


def test_raising_a_cap_of_zero_again_is_judged_from_nothing(team_c_dev, lead_c, gpu, admin):
    # The allocation was lowered to 0 and kept a class list; a pod could use none of it.
    allocation_set(
        team_namespace=team_c_dev,
        resource=gpu,
        guarantee=0,
        cap=0,
        priority_classes=["production-inference"],
        acting_user=admin,
    )
    request = submit(lead_c, team_c_dev, gpu, LineInput(team_c_dev.pk, gpu.pk, 0, 1))
    assert (request.status, request.approvals_needed) == (S.SUBMITTED, 2)
    assert "production-inference (none allowed yet)" in request.policy_reason
    assert allocation(team_c_dev, gpu).cap == 0


def test_form_a_new_line_without_classes_needs_two_admins(client, team_c_dev, mig, lead_c):
    client.force_login(lead_c)
    response = client.post("/requests/new/", form(team_c_dev, mig, 0, 1))
    assert response.status_code == 302
    request = QuotaRequest.objects.get()
    assert (request.status, request.approvals_needed) == (S.SUBMITTED, 2)
    assert not Allocation.objects.filter(team_namespace=team_c_dev, resource=mig).exists()
