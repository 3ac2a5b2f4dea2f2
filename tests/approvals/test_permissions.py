"""Who may rebase, revoke, withdraw a scheduled grant and delete a draft: every persona ×
every new move, in the API and on the pages (anonymous, auditor, lead of the team, lead of
another team, platform admin).

A refusal changes nothing and writes no audit event; a lead of another team does not even learn
that the request exists (404).
"""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from approvals.lifecycle import request_approve, request_submit
from approvals.models import QuotaRequest
from quotas.models import AuditEvent
from quotas.services import allocation_set
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db
S = QuotaRequest.Status
ANON = (401, 403)

# move -> persona -> expected API status
API = {
    "rebase": {"anonymous": ANON, "auditor": 403, "lead": 200, "other_lead": 404, "admin": 200},
    "revoke": {"anonymous": ANON, "auditor": 403, "lead": 403, "other_lead": 404, "admin": 200},
    "delete": {"anonymous": ANON, "auditor": 403, "lead": 204, "other_lead": 404, "admin": 403},
    "withdraw": {"anonymous": ANON, "auditor": 403, "lead": 200, "other_lead": 404, "admin": 403},
}
# move -> persona -> expected page status (302 after a done move; anonymous goes to login)
PAGE = {
    "rebase": {"anonymous": 302, "auditor": 403, "lead": 302, "other_lead": 404, "admin": 302},
    "revoke": {"anonymous": 302, "auditor": 403, "lead": 403, "other_lead": 404, "admin": 302},
    "delete": {"anonymous": 302, "auditor": 403, "lead": 302, "other_lead": 404, "admin": 403},
    "withdraw": {"anonymous": 302, "auditor": 403, "lead": 302, "other_lead": 404, "admin": 403},
}
AUDITED = {
    "rebase": "request.rebased",
    "revoke": "request.revoked",
    "delete": "request.deleted",
    "withdraw": "request.withdrawn",
}
PERSONAS = ["anonymous", "auditor", "lead", "other_lead", "admin"]


@pytest.fixture
def people(lead_c, lead_a, auditor, admin2):
    # lead-c leads team-c and wrote the requests; lead-a leads team-a; admin2 decided nothing.
    return {
        "anonymous": None,
        "auditor": auditor,
        "lead": lead_c,
        "other_lead": lead_a,
        "admin": admin2,
    }


@pytest.fixture
def subject(plan, lead_c, gpu, admin, strict_policy):
    """Per move, a request in the state the move applies to (revoke and withdraw: an approved
    grant waiting for its start)."""

    def make(move: str) -> QuotaRequest:
        if move == "delete":
            return new_request(lead_c, plan["team-c"], gpu, 3, 4)
        if move == "rebase":
            request = request_submit(
                request=new_request(lead_c, plan["team-c"], gpu, 3, 4), acting_user=lead_c
            )
            allocation_set(
                team_namespace=plan["team-c"], resource=gpu, guarantee=2, cap=5, acting_user=admin
            )
            return request
        grant = new_request(
            lead_c,
            plan["team-c"],
            gpu,
            3,
            4,
            kind="temporary",
            starts_at=timezone.now() + timedelta(days=2),
            ends_in=timedelta(days=4),
        )
        request_submit(request=grant, acting_user=lead_c)
        request_approve(request=grant, acting_user=admin)
        return grant

    return make


def _done(move: str, request: QuotaRequest) -> bool:
    if move == "delete":
        return not QuotaRequest.objects.filter(pk=request.pk).exists()
    request.refresh_from_db()
    if move == "revoke":
        return request.status == S.REVOKED
    if move == "withdraw":
        return request.status == S.WITHDRAWN
    return request.lines.get().base_version == 2


def _expect(table, move, persona):
    expected = table[move][persona]
    return expected if isinstance(expected, tuple) else (expected,)


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize("move", list(API))
def test_api(move, persona, people, subject):
    request = subject(move)
    client = APIClient()
    if people[persona] is not None:
        client.force_authenticate(people[persona])
    url = f"/api/v1/requests/{request.pk}/"
    if move == "delete":
        response = client.delete(url)
    else:
        response = client.post(f"{url}{move}/", {"comment": "needed elsewhere"}, format="json")
    assert response.status_code in _expect(API, move, persona), response.content
    allowed = response.status_code < 300
    assert _done(move, request) == allowed
    assert AuditEvent.objects.filter(action=AUDITED[move]).exists() == allowed
    if not allowed and response.status_code != 404 and persona != "anonymous":
        assert response.json()["message"]  # a refusal says why


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize("move", list(PAGE))
def test_page(client, move, persona, people, subject):
    request = subject(move)
    if people[persona] is not None:
        client.force_login(people[persona])
    response = client.post(
        f"/requests/{request.pk}/{move}/", {"revoke-comment": "needed elsewhere"}
    )
    assert response.status_code in _expect(PAGE, move, persona)
    if persona == "anonymous":
        assert "/login/" in response.url
    allowed = response.status_code == 302 and persona != "anonymous"
    assert _done(move, request) == allowed
    assert AuditEvent.objects.filter(action=AUDITED[move]).exists() == allowed


@pytest.mark.parametrize("persona", PERSONAS[1:])
@pytest.mark.parametrize("move", list(PAGE))
def test_buttons_show_only_for_who_may(client, move, persona, people, subject):
    request = subject(move)
    client.force_login(people[persona])
    response = client.get(f"/requests/{request.pk}/")
    if persona == "other_lead":
        assert response.status_code == 404
        return
    button = {
        "rebase": "rebase",
        "revoke": "revoke-button",
        "delete": "delete",
        "withdraw": "withdraw",
    }[move]
    may = PAGE[move][persona] == 302
    assert (f'data-testid="{button}"' in response.content.decode()) == may


# --- a new line allowing a higher class: nobody gets it in one move ---------------------------

# persona -> expected status of a create-and-submit (API, page); another team's lead does not
# learn that team-c exists (the API says unknown team, the page's team choice refuses it).
NEW_LINE_API = {"anonymous": ANON, "auditor": 403, "lead": 201, "other_lead": 400, "admin": 201}
NEW_LINE_PAGE = {"anonymous": 302, "auditor": 403, "lead": 302, "other_lead": 400, "admin": 302}


@pytest.fixture
def new_resource(plan, cluster):
    """MIG slices on the cluster, which team-c-dev has no allocation of yet; the demo's
    classes."""
    from quotas.models import ClusterCapacity, PriorityClass, Resource

    for name, value in (("production-inference", 100000), ("experiment", 1000)):
        PriorityClass.objects.create(name=name, value=value)
    mig = Resource.objects.create(
        name="nvidia.com/mig-1g.10gb", display_name="1g.10gb", kind=Resource.Kind.MIG
    )
    ClusterCapacity.objects.create(cluster=cluster, resource=mig, capacity=14)
    return mig


def _new_line_outcome(created: bool, mig) -> None:
    from quotas.models import Allocation

    # Whoever asked, the namespace is allowed no class of the new resource yet.
    assert not Allocation.objects.filter(resource=mig).exists()
    requests = list(QuotaRequest.objects.all())
    if not created:
        assert requests == []
        assert not AuditEvent.objects.filter(target_type="QuotaRequest").exists()
        return
    [request] = requests
    assert (request.status, request.auto_approved, request.approvals_needed) == (
        S.SUBMITTED,
        False,
        2,
    )
    assert "production-inference (none allowed yet)" in request.policy_reason


@pytest.mark.parametrize("persona", PERSONAS)
def test_api_new_line_with_a_higher_class(persona, people, new_resource):
    client = APIClient()
    if people[persona] is not None:
        client.force_authenticate(people[persona])
    body = {
        "team": "team-c",
        "justification": "online inference on MIG slices",
        "submit": True,
        "lines": [
            {
                "namespace": "team-c-dev",
                "cluster": "demo",
                "resource": "nvidia.com/mig-1g.10gb",
                "guarantee": "0",
                "cap": "1",
                "priority_classes": ["production-inference"],
            }
        ],
    }
    response = client.post("/api/v1/requests/", body, format="json")
    assert response.status_code in _expect({"m": NEW_LINE_API}, "m", persona), response.content
    _new_line_outcome(response.status_code == 201, new_resource)


@pytest.mark.parametrize("persona", PERSONAS)
def test_page_new_line_with_a_higher_class(client, persona, people, plan, new_resource):
    from tests.support.requests import line_data

    if people[persona] is not None:
        client.force_login(people[persona])
    data = line_data(
        plan["team-c"],
        new_resource,
        0,
        1,
        total=1,
        action="submit",
        **{"lines-0-priority_classes": "production-inference"},
    )
    response = client.post("/requests/new/", data)
    assert response.status_code in _expect({"m": NEW_LINE_PAGE}, "m", persona)
    if persona == "anonymous":
        assert "/login/" in response.url
    _new_line_outcome(response.status_code == 302 and persona != "anonymous", new_resource)
