"""The common pages read few queries, not only a fixed number: the user's groups are read once
per request however many role checks a page makes, and each page stays within its budget (the
counts of this world: a cut is kept by lowering a budget, never by raising one)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

pytestmark = pytest.mark.django_db

# page, who: at most this many queries (session, user and groups included). Raised once, by
# name: the charts' team colours read every team's slug (one query on / and /clusters/), and the
# audit log names its targets in words (one query per kind of target shown, two here). Raised
# again for the ceilings across clusters: whether a request fits reads every team's parent and
# ceiling (one query on /requests/), and the summary's budgets read the teams and their GPUs
# over every cluster (two). And for the maximum run times: the dashboard reads its teams' (one
# on /). And for the fix of a cap above the cluster's share: the allocations concerned, of the
# teams the user may ask for (one on /clusters/ where such a finding shows).
BUDGETS = [
    ("/", "lead_c", 13),
    ("/requests/", "lead_c", 13),
    ("/requests/", "admin", 13),
    ("/requests/?status=submitted", "admin", 13),
    ("/clusters/", "admin", 13),
    ("/clusters/", "lead_c", 15),
    ("/summary/", "admin", 8),
    ("/audit/", "admin", 8),
]


@pytest.mark.parametrize(("url", "who", "budget"), BUDGETS)
def test_the_page_stays_within_its_budget_and_reads_the_groups_once(
    client,
    request,
    grow,
    url,
    who,
    budget,
):
    grow(3)
    client.force_login(request.getfixturevalue(who))
    client.get(url)
    with CaptureQueriesContext(connection) as seen:
        response = client.get(url)
    assert response.status_code == 200
    sql = [q["sql"] for q in seen.captured_queries]
    assert sum('"auth_user_groups"' in s for s in sql) == 1, sql
    assert len(sql) <= budget, sql
    # A filter's choices are one plain read, not a server-side cursor (on PostgreSQL a
    # DECLARE, then a FETCH and a CLOSE the count above does not see).
    assert not [s for s in sql if s.lstrip().upper().startswith("DECLARE")], sql


@pytest.mark.parametrize("who", ["admin", "lead_c"])
def test_an_api_list_reads_the_groups_of_the_tokens_user_once(client, request, grow, who):
    from portal.tokens import api_token_create

    grow(3)
    _row, token = api_token_create(user=request.getfixturevalue(who), name="budget")
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    client.get("/api/v1/requests/", **headers)
    with CaptureQueriesContext(connection) as seen:
        response = client.get("/api/v1/requests/", **headers)
    assert response.status_code == 200
    sql = [q["sql"] for q in seen.captured_queries]
    assert sum('"auth_user_groups"' in s for s in sql) == 1, sql
