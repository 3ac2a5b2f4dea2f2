"""The live fragments of the request pages (approvals.views.live): the same rights as the pages,
a 304 while nothing changed, the new parts (and a new tag) once something did, and a settled
request said to be settled so the page stops asking."""

import re

import pytest
from django.utils import timezone

from approvals.lifecycle import request_approve, request_reject, request_submit
from approvals.models import QuotaRequest
from quotas.models import SyncRequest, TeamMembership
from tests.support.people import make_user
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db


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


def part(html: str, name: str) -> str:
    """The element of a live part, as text without tags."""
    found = re.search(rf'<(\w+)[^>]*data-live-part="{re.escape(name)}"[^>]*>(.*?)</\1>', html, re.S)
    assert found is not None, (name, html)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", found.group(2))).strip()


@pytest.mark.parametrize(
    ("who", "status"),
    [
        ("admin", 200),
        ("auditor", 200),  # the viewer reads every request, as on the page
        ("lead_c", 200),
        ("member_c", 200),
        ("other_team_lead", 404),
    ],
)
def test_the_fragment_answers_whom_the_page_answers(
    client, request, submitted, member_c, who, status
):
    client.force_login(request.getfixturevalue(who))
    page = client.get(f"/requests/{submitted.pk}/")
    live = client.get(f"/requests/{submitted.pk}/live/")
    assert page.status_code == live.status_code == status
    if status == 200:
        assert part(live.content.decode(), "status") == "submitted"
    else:
        assert "submitted" not in live.content.decode()


def test_without_a_session_the_fragment_is_refused_not_redirected(client, submitted):
    response = client.get(f"/requests/{submitted.pk}/live/")
    assert response.status_code == 403
    assert "log in again" in response.content.decode()
    listed = client.get(f"/requests/live/?ids={submitted.pk}")
    assert listed.status_code == 403
    assert "submitted" not in listed.content.decode()


def test_an_unchanged_request_is_a_304_and_a_change_brings_the_new_parts(
    client, submitted, lead_c, admin
):
    client.force_login(lead_c)
    url = f"/requests/{submitted.pk}/live/"
    first = client.get(url)
    etag = first["ETag"]
    assert first.status_code == 200 and etag.startswith('W/"live-')
    assert "no-cache" in first["Cache-Control"]
    unchanged = client.get(url, HTTP_IF_NONE_MATCH=etag)
    assert unchanged.status_code == 304 and unchanged.content == b""

    request_approve(request=submitted, acting_user=admin)
    changed = client.get(url, HTTP_IF_NONE_MATCH=etag)
    assert changed.status_code == 200 and changed["ETag"] != etag
    html = changed.content.decode()
    assert part(html, "status") == "applying"
    assert "admin" in part(html, "approvals")
    assert part(html, "approvals-count") == "1 of 1 approval given."
    # The sync it started is shown, not tried yet; its success moves the tag again.
    assert "not tried yet" in part(html, "syncs")
    sync = submitted.sync_requests.get()
    SyncRequest.objects.filter(pk=sync.pk).update(
        status=SyncRequest.Status.DONE, attempts=1, completed_at=timezone.now()
    )
    synced = client.get(url, HTTP_IF_NONE_MATCH=changed["ETag"])
    assert synced.status_code == 200
    assert re.search(r'data-testid="sync-attempts"[^>]*>1<', synced.content.decode())


def test_a_settled_request_tells_the_page_to_stop_asking(client, submitted, lead_c, admin):
    client.force_login(lead_c)
    assert 'data-live-final=""' in client.get(f"/requests/{submitted.pk}/live/").content.decode()
    request_reject(request=submitted, acting_user=admin, comment="not this quarter")
    html = client.get(f"/requests/{submitted.pk}/live/").content.decode()
    assert 'data-live-final="1"' in html
    assert part(html, "status") == "rejected"
    page = client.get(f"/requests/{submitted.pk}/").content.decode()
    assert 'id="live"' in page and 'data-live-final="1"' in page


def test_the_page_and_the_fragment_name_the_same_actions(client, submitted, admin):
    client.force_login(admin)
    page = client.get(f"/requests/{submitted.pk}/").content.decode()
    live = client.get(f"/requests/{submitted.pk}/live/").content.decode()
    actions = re.search(r'id="live"[^>]*data-live-actions="([^"]*)"', page).group(1)
    assert "approve" in actions.split()
    assert f'data-live-actions="{actions}"' in live
    request_approve(request=submitted, acting_user=admin)
    after = client.get(f"/requests/{submitted.pk}/live/").content.decode()
    assert f'data-live-actions="{actions}"' not in after  # the page's buttons are out of date


# --- the list --------------------------------------------------------------------------------


def test_the_list_fragment_shows_the_rows_asked_for_that_the_user_may_see(
    client, submitted, plan, gpu, admin, other_team_lead
):
    theirs = new_request(admin, plan["team-a"], gpu, 1, 2)
    client.force_login(other_team_lead)
    mine = new_request(other_team_lead, plan["team-b"], gpu, 1, 2)
    html = client.get(f"/requests/live/?ids={submitted.pk},{mine.pk},{theirs.pk}").content.decode()
    assert part(html, f"status-{mine.pk}") == "draft"
    assert f"status-{submitted.pk}" not in html and f"status-{theirs.pk}" not in html


def test_a_request_approved_in_the_queue_shows_so_and_the_queue_says_it_changed(
    client, submitted, admin, admin2
):
    client.force_login(admin)
    query = f"status=submitted&ids={submitted.pk}"
    first = client.get(f"/requests/live/?{query}")
    html = first.content.decode()
    assert part(html, f"status-{submitted.pk}") == "submitted"
    assert 'data-testid="list-changed"' not in html
    assert (
        client.get(f"/requests/live/?{query}", HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 304
    )

    request_approve(request=submitted, acting_user=admin2)
    html = client.get(f"/requests/live/?{query}", HTTP_IF_NONE_MATCH=first["ETag"]).content.decode()
    assert part(html, f"status-{submitted.pk}") == "applying"
    assert part(html, f"approvals-{submitted.pk}") == "1 of 1"
    assert 'data-testid="list-changed"' in html  # it left the queue: the list is out of date
    tabs = part(html, "tabs")
    assert "applying 1" in tabs and "submitted" not in tabs
    # The tabs link to the list's own filters, not to the poll's.
    assert "ids=" not in re.search(r'data-live-part="tabs".*?</nav>', html, re.S).group(0)


@pytest.mark.parametrize("ids", ["1,x", "-1", "1" * 30, ",".join(["1"] * 101), "\u0663"])
def test_bad_ids_are_refused_naming_the_rule(client, admin, ids):
    client.force_login(admin)
    response = client.get("/requests/live/", {"ids": ids})
    assert response.status_code == 400
    assert "ids: give at most 100 request numbers, separated by commas" in response.content.decode()


def test_a_request_of_another_team_stays_out_whatever_is_asked(client, submitted, other_team_lead):
    client.force_login(other_team_lead)
    assert client.get(f"/requests/{submitted.pk}/live/").status_code == 404
    response = client.get(f"/requests/live/?ids={submitted.pk}")
    assert response.status_code == 200
    assert f"status-{submitted.pk}" not in response.content.decode()
    assert QuotaRequest.objects.filter(pk=submitted.pk).exists()


def test_the_list_fragment_pages_and_filters_as_the_list_does(client, submitted, admin):
    client.force_login(admin)
    far = client.get("/requests/live/", {"ids": str(submitted.pk), "page": "9" * 30})
    assert far.status_code == 200  # past the last page: the last page, as the list shows it
    assert 'data-testid="list-changed"' not in far.content.decode()
    bad = client.get("/requests/live/", {"ids": str(submitted.pk), "created_after": "yesterday"})
    assert bad.status_code == 400
    assert "created_after: " in bad.content.decode()
