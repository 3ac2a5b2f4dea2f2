"""The discussion on a request: who reads and writes it, what text is refused, the audit
chain and the notifications, over the service, the page and the API."""

import pytest
from django.core import mail
from django.test import Client
from rest_framework.test import APIClient

from approvals.discussion import request_comment_add
from approvals.lifecycle import request_reject, request_submit
from approvals.models import COMMENT_MAX_LENGTH, RequestComment
from common.errors import PermissionDenied, ValidationFailed
from portal.celery import app
from portal.tokens import api_token_create
from quotas.audit.chain import audit_missing_events, audit_verify
from quotas.models import AuditEvent
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db


@pytest.fixture
def submitted(plan, lead_c, gpu, strict_policy):
    request = new_request(lead_c, plan["team-c"], gpu, 3, 6)
    return request_submit(request=request, acting_user=lead_c)


def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=user, name='t')[1]}")
    return client


def page(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_lead_and_admin_discuss_before_and_after_the_decision_and_the_audit_holds_it(
    submitted, lead_c, admin
):
    first = request_comment_add(request=submitted, acting_user=admin, text="Would 5 do?")
    second = request_comment_add(
        request=submitted, acting_user=lead_c, text="  No: 6.\r\nSee the runs.  "
    )
    assert second.text == "No: 6.\nSee the runs."
    request_reject(request=submitted, acting_user=admin, comment="not this quarter")
    third = request_comment_add(request=submitted, acting_user=lead_c, text="Next quarter then.")
    events = AuditEvent.objects.filter(action="request.comment").order_by("seq")
    assert [(e.actor_username, e.comment, e.after["comment"]) for e in events] == [
        ("admin", "Would 5 do?", first.pk),
        ("lead-c", "No: 6.\nSee the runs.", second.pk),
        ("lead-c", "Next quarter then.", third.pk),
    ]
    assert events.last().after["status"] == "rejected"
    assert audit_verify().ok
    assert audit_missing_events() == []


def test_a_comment_missing_from_the_audit_log_shows(submitted, admin):
    # A row written around the service (as a tampered database would hold it).
    RequestComment.objects.create(request=submitted, author=admin, text="unrecorded")
    assert any("request comments without" in p for p in audit_missing_events())


def test_who_may_comment(submitted, auditor, other_team_lead, plan):
    from quotas.models import TeamMembership
    from tests.support.people import make_user

    member = make_user("member-c")
    TeamMembership.objects.create(
        team=plan["team-c"].team, user=member, role=TeamMembership.Role.MEMBER
    )
    for person in (auditor, other_team_lead, member):
        with pytest.raises(PermissionDenied):
            request_comment_add(request=submitted, acting_user=person, text="hello")
    assert not RequestComment.objects.exists()


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("   ", "must not be empty"),
        ("x" * (COMMENT_MAX_LENGTH + 1), f"at most {COMMENT_MAX_LENGTH} characters"),
        ("pay \u202eteg\u202c here", "U+202C, U+202E"),
        ("bell\x07", "U+0007"),
    ],
)
def test_bad_text_is_refused_naming_the_field(submitted, lead_c, text, rule):
    with pytest.raises(ValidationFailed) as refused:
        request_comment_add(request=submitted, acting_user=lead_c, text=text)
    assert refused.value.field == "text"
    assert refused.value.message.startswith("text: ") and rule in refused.value.message
    assert not RequestComment.objects.exists()


def test_the_page_shows_escapes_and_keeps_refused_text(submitted, lead_c, auditor, other_team_lead):
    url = f"/requests/{submitted.pk}/"
    lead = page(lead_c)
    answer = lead.post(f"{url}comments/", {"discussion-text": "<script>alert(1)</script>"})
    assert answer.status_code == 302
    html = lead.get(url).content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html

    too_long = "y" * (COMMENT_MAX_LENGTH + 5)
    refused = lead.post(f"{url}comments/", {"discussion-text": too_long})
    assert refused.status_code == 400
    body = refused.content.decode()
    assert f"a comment has at most {COMMENT_MAX_LENGTH} characters" in body
    assert too_long in body  # kept in the form
    nul = lead.post(f"{url}comments/", {"discussion-text": "a\x00b"})
    assert nul.status_code == 400

    viewer = page(auditor)
    assert "&lt;script&gt;" in viewer.get(url).content.decode()
    assert viewer.post(f"{url}comments/", {"discussion-text": "hi"}).status_code == 403
    other = page(other_team_lead)
    assert other.get(url).status_code == 404
    assert other.post(f"{url}comments/", {"discussion-text": "hi"}).status_code == 404
    assert RequestComment.objects.count() == 1


def test_the_api_lists_and_posts_comments_idempotently(
    submitted, lead_c, admin, other_team_lead, auditor
):
    url = f"/api/v1/requests/{submitted.pk}/comments/"
    answer = api(admin).post(url, {"text": "Why 6?"}, format="json", HTTP_IDEMPOTENCY_KEY="c-1")
    assert answer.status_code == 201, answer.json()
    assert answer.json()["author"] == "admin" and answer.json()["text"] == "Why 6?"
    replay = api(admin).post(url, {"text": "Why 6?"}, format="json", HTTP_IDEMPOTENCY_KEY="c-1")
    assert replay.status_code == 201 and replay["Idempotent-Replayed"] == "true"
    api(lead_c).post(url, {"text": "Two runs at once."}, format="json")
    listed = api(auditor).get(url).json()
    assert [(c["author"], c["text"]) for c in listed["results"]] == [
        ("admin", "Why 6?"),
        ("lead-c", "Two runs at once."),
    ]
    empty = api(lead_c).post(url, {"text": ""}, format="json")
    assert empty.status_code == 400 and empty.json()["extra"]["field"] == "text"
    assert api(auditor).post(url, {"text": "x"}, format="json").status_code == 403
    assert api(other_team_lead).get(url).status_code == 404
    assert api(other_team_lead).post(url, {"text": "x"}, format="json").status_code == 404
    assert RequestComment.objects.count() == 2


@pytest.fixture
def eager_tasks():
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


@pytest.mark.django_db(transaction=True)
def test_a_comment_tells_the_other_side(
    plan, lead_c, gpu, strict_policy, admin, admin2, eager_tasks
):
    for user, email in (
        (lead_c, "lead-c@example.com"),
        (admin, "admin@example.com"),
        (admin2, "admin2@example.com"),
    ):
        user.email = email
        user.save()
    request = request_submit(
        request=new_request(lead_c, plan["team-c"], gpu, 3, 6), acting_user=lead_c
    )
    mail.outbox.clear()
    request_comment_add(request=request, acting_user=lead_c, text="Urgent: a deadline on Friday")
    assert [sorted(m.to) for m in mail.outbox] == [["admin2@example.com", "admin@example.com"]]
    assert "has a new comment" in mail.outbox[0].subject
    assert "> Urgent: a deadline on Friday" in mail.outbox[0].body
    assert "Comment by: lead-c" in mail.outbox[0].body
    mail.outbox.clear()
    request_comment_add(request=request, acting_user=admin, text="Approving 5 today.")
    assert [m.to for m in mail.outbox] == [["lead-c@example.com"]]
