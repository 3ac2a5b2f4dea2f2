"""The rulebook (approvals.access): one answer to "may this user do this to this request now",
with one refusal text per reason, which the services raise, the pages show and the lists ask
as a query; and a rebase that checks a waiting request again stores what submit stores."""

from decimal import Decimal

import pytest
from django.utils import translation

from approvals.access import ACTIONS, REFUSALS, allowed_actions, may, restrict
from approvals.lifecycle import (
    request_approve,
    request_changes,
    request_rebase,
    request_reject,
    request_submit,
    request_withdraw,
)
from approvals.models import QuotaRequest
from common.errors import NotAllowed, PermissionDenied
from quotas.models import Allocation
from quotas.services import allocation_set
from quotas.texts import Text
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db
S = QuotaRequest.Status


@pytest.fixture
def waiting(plan, lead_c, gpu, strict_policy):
    return request_submit(
        request=new_request(lead_c, plan["team-c"], gpu, 3, 6), acting_user=lead_c
    )


def test_a_refusal_names_its_reason_and_is_the_error_the_service_raises(waiting, lead_c, auditor):
    access = may(auditor, waiting, "approve")
    assert not access and access.reason == "admins_decide" and access.status_code == 403
    assert access.message == "only platform admins decide quota requests"
    with pytest.raises(PermissionDenied) as raised:
        request_approve(request=waiting, acting_user=auditor)
    assert raised.value.message == access.message

    state = may(lead_c, waiting, "delete")
    assert state.reason == "not_deletable" and state.status_code == 409
    assert isinstance(state.error, NotAllowed)
    assert state.error.extra == {"field": "status", "status": "submitted"}


def test_refusals_are_translated_when_asked(waiting, auditor):
    with translation.override("zh-hans"):
        message = may(auditor, waiting, "revoke").message
    assert message and message != str(REFUSALS["admins_decide"])


def test_nobody_rejects_or_sends_back_their_own_request(plan, admin, gpu, strict_policy):
    """Reject and ask-for-changes follow the same rule as approve (and as the page's buttons,
    which never showed them on an admin's own request)."""
    own = request_submit(request=new_request(admin, plan["team-c"], gpu, 3, 6), acting_user=admin)
    for service in (request_reject, request_changes):
        with pytest.raises(PermissionDenied, match="nobody approves their own request"):
            service(request=own, acting_user=admin, comment="no")
    assert not {"approve", "reject", "changes"} & allowed_actions(admin, own)


def test_every_button_is_what_the_rulebook_allows(waiting, lead_c, admin, auditor):
    for user in (lead_c, admin, auditor):
        shown = allowed_actions(user, waiting)
        assert shown == {a for a in ACTIONS if a != "preview" and may(user, waiting, a)}
    assert may(admin, waiting, "preview") and may(auditor, waiting, "preview")
    assert may(lead_c, waiting, "preview").reason == "preview_in_clusters"


def test_an_admin_approves_once(plan, other_team_lead, gpu, admin, strict_policy):
    strict_policy.two_admins_above = Decimal(1)
    strict_policy.save()
    request = request_submit(
        request=new_request(other_team_lead, plan["team-b"], gpu, 4, 8),
        acting_user=other_team_lead,
    )
    assert request.approvals_needed == 2
    request_approve(request=request, acting_user=admin)
    access = may(admin, request, "approve")
    assert access.reason == "approved_already"
    assert (
        access.message
        == f"admin approved request #{request.pk} already; a second admin must approve"
    )
    assert {"reject", "changes"} <= allowed_actions(admin, request)
    assert "approve" not in allowed_actions(admin, request)


def test_restrict_is_may_as_a_query(plan, waiting, lead_c, admin, admin2, gpu, other_team_lead):
    own = new_request(admin, plan["team-a"], gpu, 7, 10)
    request_submit(request=own, acting_user=admin)
    everything = QuotaRequest.objects.all()
    for user in (admin, admin2, lead_c, other_team_lead):
        listed = set(restrict(everything, user, "approve"))
        assert listed == {r for r in everything if may(user, r, "approve")}
    assert set(restrict(everything, lead_c, "view")) == {waiting}


def test_withdrawn_requests_are_refused_by_the_transitions_table(waiting, lead_c):
    request_withdraw(request=waiting, acting_user=lead_c)
    waiting.refresh_from_db()
    access = may(lead_c, waiting, "submit")
    assert access.reason == "status"
    assert "cannot become submitted" in access.message


# --- the drift: a rebase checks a waiting request again as on submit -------------------------


def test_a_rebase_stores_the_policy_reason_as_submit_does(
    plan, other_team_lead, gpu, admin, strict_policy
):
    """R1 (cap 6 → 7) needs one admin; the cap is lowered to 5 meanwhile, so the rebased R1
    raises it by 2, above the threshold of 1: two admins, and the stored reason says so."""
    strict_policy.two_admins_above = Decimal(1)
    strict_policy.save()
    ns_b = plan["team-b"]
    r1 = request_submit(
        request=new_request(other_team_lead, ns_b, gpu, 4, 7), acting_user=other_team_lead
    )
    assert (r1.approvals_needed, r1.policy_reason) == (1, "one platform admin must approve")
    allocation_set(team_namespace=ns_b, resource=gpu, guarantee=4, cap=5, acting_user=admin)
    assert Allocation.objects.get(team_namespace=ns_b).cap == 5

    request_rebase(request=r1, acting_user=other_team_lead)
    r1.refresh_from_db()
    assert r1.status == S.SUBMITTED
    expected = "an increase of 2 on demo is above 1: two admins must approve"
    assert (r1.approvals_needed, r1.policy_reason) == (2, expected)
    assert Text.from_json(r1.policy_reason_text).english() == expected
    with translation.override("zh-hans"):
        assert r1.localized_policy_reason != expected
