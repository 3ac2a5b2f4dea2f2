"""The page of one request: current, requested and decided values side by side, the
justification, a readable timeline, the syncs with their errors, where it stands with its
approvals in words, and only the actions this viewer may take."""

import re

import pytest

from approvals.lifecycle import request_approve, request_submit
from approvals.lines import Decision
from approvals.models import QuotaRequest
from quotas.models import SyncRequest, TeamMembership
from tests.support.people import make_user
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db
S = QuotaRequest.Status
ACTIONS = ("approve", "reject", "ask-changes", "edit", "submit", "withdraw", "delete", "rebase")


@pytest.fixture
def member_c(plan):
    user = make_user("member-c")
    TeamMembership.objects.create(
        team=plan["team-c"].team, user=user, role=TeamMembership.Role.MEMBER
    )
    return user


@pytest.fixture
def submitted(plan, lead_c, gpu, strict_policy):
    request = new_request(lead_c, plan["team-c"], gpu, 3, 6)
    return request_submit(request=request, acting_user=lead_c)


def actions_on(page: str) -> set[str]:
    return {a for a in ACTIONS if f'data-testid="{a}"' in page}


@pytest.mark.parametrize(
    ("who", "status", "actions"),
    [
        ("admin", 200, {"approve", "reject", "ask-changes"}),
        ("auditor", 200, set()),
        ("lead_c", 200, {"withdraw"}),
        ("member_c", 200, set()),
        ("other_team_lead", 404, None),
    ],
)
def test_each_role_sees_the_page_with_only_its_actions(
    client, request, submitted, member_c, who, status, actions
):
    client.force_login(request.getfixturevalue(who))
    response = client.get(f"/requests/{submitted.pk}/")
    assert response.status_code == status
    if actions is not None:
        assert actions_on(response.content.decode()) == actions


def test_anonymous_is_sent_to_login(client, submitted):
    response = client.get(f"/requests/{submitted.pk}/")
    assert response.status_code == 302 and response.url.startswith("/login/")


def test_a_draft_offers_its_requester_edit_submit_withdraw_and_delete(client, plan, lead_c, gpu):
    draft = new_request(lead_c, plan["team-c"], gpu, 3, 6)
    client.force_login(lead_c)
    page = client.get(f"/requests/{draft.pk}/").content.decode()
    assert actions_on(page) == {"edit", "submit", "withdraw", "delete"}
    assert "Not submitted: the cluster&#x27;s policy says who must approve when it is." in page


def test_current_requested_and_decided_side_by_side(client, submitted, admin):
    line = submitted.lines.get()
    request_approve(
        request=submitted,
        acting_user=admin,
        comment="5 is enough",
        decisions=[Decision(line.pk, 3, 5)],
    )
    client.force_login(admin)
    page = client.get(f"/requests/{submitted.pk}/").content.decode()
    cap = re.search(rf'<tr data-testid="line-{line.pk}-cap">(.*?)</tr>', page, re.S).group(1)
    cells = re.findall(r"<td[^>]*>([^<]*)", cap)
    assert [c.strip() for c in cells] == ["4", "6", "5"]  # current, requested, decided
    # Marked changed (not as requested); the cells carry their column label for phones.
    assert re.search(r'class="num changed"[^>]*data-testid="decided-cap"[^>]*>5<', cap)
    assert re.search(r'data-testid="decided-guarantee"[^>]*>3<', page)
    per_pod = re.search(rf'<tr data-testid="line-{line.pk}-per_pod_max">(.*?)</tr>', page, re.S)
    none = "\N{EN DASH}"
    assert [c.strip() for c in re.findall(r"<td[^>]*>([^<]*)", per_pod.group(1))] == [none] * 3
    assert '<th scope="col" class="num">Current</th>' in page
    # The table scrolls inside its card: its wrapper opens right before it.
    assert re.search(
        r'<div class="table-scroll">\s*(?:\S[^<]*)?<table class="request-lines stack"', page
    )


def test_the_justification_and_the_approvals_in_words(client, submitted, admin, admin2):
    submitted.approvals_needed = 2
    submitted.save(update_fields=["approvals_needed"])
    request_approve(request=submitted, acting_user=admin)
    client.force_login(admin)
    page = client.get(f"/requests/{submitted.pk}/").content.decode()
    assert 'data-testid="justification">more training runs<' in page
    assert 'data-testid="approvals-count">1 of 2 approvals given.' in page
    assert "You approved it already; another platform admin must approve too." in page
    assert "approve" not in actions_on(page)
    client.force_login(admin2)
    page = client.get(f"/requests/{submitted.pk}/").content.decode()
    assert "approve" in actions_on(page) and "You approved it already" not in page


def test_an_auto_approved_request_says_so(client, plan, lead_c, gpu):
    request = request_submit(
        request=new_request(lead_c, plan["team-c"], gpu, 1, 3), acting_user=lead_c
    )
    assert request.auto_approved
    client.force_login(lead_c)
    page = client.get(f"/requests/{request.pk}/").content.decode()
    assert 'data-testid="approvals-count">Auto-approved by the cluster&#x27;s policy.<' in page
    assert "0/1" not in page and "auto-approved)" not in page
    # Approved as requested: no decided values, said in words.
    assert page.count(">as requested<") == 4


def test_the_timeline_reads_as_sentences_with_actors_and_minutes(client, submitted, admin):
    request_approve(request=submitted, acting_user=admin, comment="fine by me")
    client.force_login(admin)
    page = client.get(f"/requests/{submitted.pk}/").content.decode()
    timeline = re.search(r'data-testid="timeline">(.*?)</ol>', page, re.S).group(1)
    labels = re.findall(r"<strong>([^<]+)</strong> · ([^·]+) ·", timeline)
    assert [(label, who.strip()) for label, who in labels] == [
        ("Draft saved", "lead-c"),
        ("Submitted", "lead-c"),
        ("Approved", "admin"),
        ("Being applied", "admin"),
    ]
    shown = re.findall(r"<time [^>]*>([^<]+)</time>", timeline)
    assert shown and all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", t) for t in shown)
    assert "fine by me" in timeline
    assert not re.search(r"\d\d:\d\d:\d\d\.\d{6}", page)  # no ISO microseconds anywhere


def test_the_syncs_of_the_request_with_their_errors(client, submitted, admin, lead_c):
    request_approve(request=submitted, acting_user=admin)
    [sync] = submitted.sync_requests.all()
    SyncRequest.objects.filter(pk=sync.pk).update(
        status=SyncRequest.Status.FAILED,
        attempts=3,
        last_error="admission webhook denied the Queue team-c-dev",
    )
    client.force_login(lead_c)
    page = client.get(f"/requests/{submitted.pk}/").content.decode()
    row = re.search(rf'<tr data-testid="sync-{sync.pk}" class="bad">(.*?)</tr>', page, re.S)
    assert row is not None
    assert "failed (retried by the reconciler)" in row.group(1)
    assert "admission webhook denied the Queue team-c-dev" in row.group(1)
    assert re.search(r'<td class="num"[^>]*data-testid="sync-attempts"[^>]*>3</td>', row.group(1))


def test_a_request_without_syncs_shows_no_sync_table(client, submitted, lead_c):
    client.force_login(lead_c)
    assert 'data-testid="syncs"' not in client.get(f"/requests/{submitted.pk}/").content.decode()


def test_the_preview_page_for_admins_and_auditors_only(client, submitted, admin, auditor, lead_c):
    client.force_login(lead_c)
    refused = client.get(f"/requests/{submitted.pk}/preview/")
    assert refused.status_code == 403
    assert "Only platform admins and auditors preview requests" in refused.content.decode()
    for user in (admin, auditor):
        client.force_login(user)
        page = client.get(f"/requests/{submitted.pk}/preview/")
        assert page.status_code == 200
        assert 'data-testid="preview-error"' in page.content.decode()  # no cluster here
