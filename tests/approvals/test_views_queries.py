"""Each request page reads a fixed number of SQL queries, whatever the number of requests,
teams, lines or events: measured at two sizes, the counts must be equal."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.lifecycle import request_create, request_revise
from approvals.lines import LineInput
from approvals.models import QuotaRequest
from quotas.models import TeamNamespace
from tests.support.requests import line_data

pytestmark = pytest.mark.django_db


def queries(client, method: str, url: str, data=None) -> int:
    with CaptureQueriesContext(connection) as seen:
        response = getattr(client, method)(url, data) if data else getattr(client, method)(url)
    assert response.status_code == 200, response.content[:2000]
    return len(seen.captured_queries)


def two_sizes(grow, measure) -> tuple[int, int]:
    grow(1)
    small = measure()
    grow(5)
    large = measure()
    return small, large


@pytest.mark.parametrize(
    "url",
    [
        "/requests/",
        "/requests/?status=submitted",
        "/requests/?cluster=demo&ordering=cluster,-submitted&older_than=0",
    ],
)
@pytest.mark.parametrize("who", ["admin", "lead_c"])
def test_the_list(client, request, grow, url, who):
    client.force_login(request.getfixturevalue(who))
    small, large = two_sizes(grow, lambda: queries(client, "get", url))
    assert QuotaRequest.objects.count() == 18
    assert small == large, (small, large)


def test_the_new_form_and_its_check(client, grow, plan, admin, lead_c, gpu):
    client.force_login(admin)
    small, large = two_sizes(grow, lambda: queries(client, "get", "/requests/new/"))
    assert small == large, (small, large)
    client.force_login(lead_c)
    data = line_data(plan["team-c"], gpu, 3, 6)
    small, large = two_sizes(grow, lambda: queries(client, "post", "/requests/validate/", data))
    assert small == large, (small, large)


def _request_of(team, user, gpu, cluster, lines: int) -> QuotaRequest:
    """A request of the team with the given number of lines (a namespace each), revised
    twice so its timeline grows too."""
    inputs = []
    for i in range(lines):
        ns = TeamNamespace.objects.create(
            team=team, cluster=cluster, name=f"{team.slug}-{lines}-{i}"
        )
        inputs.append(LineInput(ns.pk, gpu.pk, 0, 1))
    request = request_create(team=team, acting_user=user, justification="x", lines=inputs)
    for _ in range(lines):
        request = request_revise(request=request, acting_user=user, lines=inputs)
    return request


@pytest.fixture
def sized(cluster, gpu, lead_c, plan):
    team = plan["team-c"].team
    return {n: _request_of(team, lead_c, gpu, cluster, n) for n in (1, 4)}


@pytest.mark.parametrize("who", ["admin", "lead_c", "auditor"])
def test_the_detail_page_of_a_draft(client, request, sized, who):
    client.force_login(request.getfixturevalue(who))
    small = queries(client, "get", f"/requests/{sized[1].pk}/")
    large = queries(client, "get", f"/requests/{sized[4].pk}/")
    assert small == large, (small, large)


def test_the_detail_page_of_a_waiting_request_for_the_deciding_admin(
    client, sized, lead_c, admin, strict_policy
):
    from approvals.lifecycle import request_submit

    for request in sized.values():
        request_submit(request=request, acting_user=lead_c)
    client.force_login(admin)
    small = queries(client, "get", f"/requests/{sized[1].pk}/")
    large = queries(client, "get", f"/requests/{sized[4].pk}/")
    assert small == large, (small, large)


def test_the_edit_form(client, sized, lead_c):
    client.force_login(lead_c)
    small = queries(client, "get", f"/requests/{sized[1].pk}/edit/")
    large = queries(client, "get", f"/requests/{sized[4].pk}/edit/")
    assert small == large, (small, large)
