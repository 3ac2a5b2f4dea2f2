"""GET /api/v1/requests/ reads a fixed number of queries at any size, and its lines and
approvals (prefetched into lists for the page) answer exactly as a single request's read."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.models import Approval, QuotaRequest
from portal.tokens import api_token_create

pytestmark = pytest.mark.django_db


def _list(client, token) -> tuple[int, dict]:
    with CaptureQueriesContext(connection) as seen:
        response = client.get(
            "/api/v1/requests/?page_size=500", HTTP_AUTHORIZATION=f"Bearer {token}"
        )
    assert response.status_code == 200, response.content[:2000]
    return len(seen.captured_queries), response.json()


@pytest.mark.parametrize("who", ["admin", "lead_c"])
def test_the_list_reads_a_fixed_number_of_queries(client, request, grow, who):
    _row, token = api_token_create(user=request.getfixturevalue(who), name="t")
    grow(1)
    _list(client, token)  # the token's last use is written once
    small, _ = _list(client, token)
    grow(5)
    large, body = _list(client, token)
    assert body["count"] == QuotaRequest.objects.count() == 18
    assert small == large, (small, large)


def test_each_row_of_the_list_is_the_request_as_read_alone(client, grow, admin, admin2):
    grow(2)
    for waiting in QuotaRequest.objects.filter(status=QuotaRequest.Status.SUBMITTED)[:2]:
        # An approval given, more needed (as under a two-admin policy).
        Approval.objects.create(request=waiting, admin=admin2, comment="fine by me")
    _row, token = api_token_create(user=admin, name="t")
    _count, body = _list(client, token)
    rows = body["results"]
    assert any(row["approvals"] for row in rows)
    assert any(row["fits_plan"] for row in rows)
    for row in rows:
        alone = client.get(
            f"/api/v1/requests/{row['id']}/", HTTP_AUTHORIZATION=f"Bearer {token}"
        ).json()
        assert row == alone
        assert [line["id"] for line in row["lines"]] == sorted(line["id"] for line in row["lines"])
