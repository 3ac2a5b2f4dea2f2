"""One answer to "who may edit this request": the request page's buttons and edit form ask
approvals.access.may, the rulebook the services enforce.

They used to disagree: the service let a platform admin revise and submit any team's draft (as
admins may request for any team), while the page hid Edit and Submit from them, and showed the
edit form to anyone who could see the request (an auditor, a member), only for the save to fail.
"""

import pytest

from approvals.access import allowed_actions, may, may_request_for
from approvals.lifecycle import request_revise
from approvals.lines import LineInput
from approvals.models import QuotaRequest
from common.errors import PermissionDenied
from quotas.models import TeamMembership
from tests.support.people import make_user
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(plan, lead_c, admin2, auditor):
    member = make_user("member-c")
    TeamMembership.objects.create(
        team=plan["team-c"].team, user=member, role=TeamMembership.Role.MEMBER
    )
    return {"requester": lead_c, "admin": admin2, "auditor": auditor, "member": member}


@pytest.fixture
def draft(plan, gpu, lead_c):
    return new_request(lead_c, plan["team-c"], gpu, 2, 5)


EXPECTED_EDIT = {"requester": True, "admin": True, "auditor": False, "member": False}


def _service_allows(user, draft, plan, gpu) -> bool:
    try:
        request_revise(
            request=draft,
            acting_user=user,
            lines=[LineInput(plan["team-c"].pk, gpu.pk, 2, 6)],
        )
    except PermissionDenied:
        return False
    return True


@pytest.mark.parametrize("who", list(EXPECTED_EDIT))
def test_the_page_shows_edit_exactly_when_the_service_allows_it(
    client, people, draft, plan, gpu, who
):
    user = people[who]
    assert bool(may(user, draft, "edit")) is EXPECTED_EDIT[who]
    client.force_login(user)
    page = client.get(f"/requests/{draft.pk}/").content.decode()
    assert ('data-testid="edit"' in page) is EXPECTED_EDIT[who]
    assert ('data-testid="submit"' in page) is EXPECTED_EDIT[who]
    form = client.get(f"/requests/{draft.pk}/edit/")
    assert form.status_code == (200 if EXPECTED_EDIT[who] else 403)
    assert _service_allows(user, draft, plan, gpu) is EXPECTED_EDIT[who]


def test_an_admin_edits_another_teams_draft_on_the_page(client, people, draft, plan, gpu):
    client.force_login(people["admin"])
    response = client.post(
        f"/requests/{draft.pk}/edit/",
        {
            "team": draft.team_id,
            "justification": "corrected by an admin",
            "kind": "permanent",
            "lines-TOTAL_FORMS": "1",
            "lines-INITIAL_FORMS": "0",
            "lines-0-team_namespace": plan["team-c"].pk,
            "lines-0-resource": gpu.pk,
            "lines-0-guarantee": "2",
            "lines-0-cap": "6",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    draft.refresh_from_db()
    assert draft.justification == "corrected by an admin"
    assert draft.lines.get().requested_cap == 6


def test_actions_follow_the_status(people, draft):
    assert allowed_actions(people["requester"], draft) == {
        "edit",
        "submit",
        "withdraw",
        "delete",
        "rebase",
        "comment",
    }
    draft.status = QuotaRequest.Status.SUBMITTED
    assert allowed_actions(people["admin"], draft) == {
        "approve",
        "reject",
        "changes",
        "rebase",
        "comment",
    }
    assert allowed_actions(people["auditor"], draft) == set()  # reads the discussion only
    assert allowed_actions(people["requester"], draft) == {"withdraw", "rebase", "comment"}


def test_who_may_request_for_a_team_is_one_answer(client, people, plan, gpu, admin):
    """The request service, the suggestion button and the list's New request button all ask
    teams_requestable_by."""
    from usage.models import Suggestion
    from usage.suggestion_selectors import suggestion_requestable_by

    team = plan["team-c"].team
    suggestion = Suggestion(team_namespace=plan["team-c"], resource=gpu)
    for who, user in {**people, "platform admin": admin}.items():
        expected = who in ("requester", "admin", "platform admin")  # lead-c and admins
        assert may_request_for(user, team.pk) is expected, who
        assert suggestion_requestable_by(user, suggestion) is expected, who
        client.force_login(user)
        page = client.get("/requests/").content.decode()
        assert ('data-testid="new-request"' in page) is expected, who
