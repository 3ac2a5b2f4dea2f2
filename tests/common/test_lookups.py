"""``field__any_of``: the rows ``__in`` selects, sent to PostgreSQL as one array parameter."""

import pytest
from django.db import connection

from approvals.models import QuotaRequest
from quotas.models import Team

pytestmark = pytest.mark.django_db


@pytest.fixture
def teams(db):
    return [Team.objects.create(slug=f"t-{i}", name=f"T {i}") for i in range(5)]


@pytest.mark.parametrize(
    "lookup, values",
    [
        ("pk", lambda teams: [teams[0].pk, teams[3].pk, teams[3].pk, 2**40]),
        ("pk", lambda teams: [teams[1].pk, None]),
        ("slug", lambda teams: ["t-2", "t-4", "nope", "t-'x"]),
        ("parent_id", lambda teams: [teams[0].pk]),  # a foreign key by its column
        ("parent", lambda teams: [teams[0].pk]),
        ("pk", lambda teams: []),
    ],
)
def test_any_of_selects_what_in_selects(teams, lookup, values):
    Team.objects.filter(pk__in=[teams[2].pk, teams[4].pk]).update(parent=teams[0])
    given = values(teams)
    ours = Team.objects.filter(**{f"{lookup}__any_of": given}).order_by("pk")
    assert list(ours) == list(Team.objects.filter(**{f"{lookup}__in": given}).order_by("pk"))


def test_on_postgresql_the_values_go_as_one_array(teams):
    ids = [team.pk for team in teams]
    sql, params = QuotaRequest.objects.filter(team_id__any_of=ids).query.sql_with_params()
    if connection.vendor == "postgresql":
        assert '"approvals_quotarequest"."team_id" = ANY(%s)' in sql
        assert list(params) == [ids]
    else:
        assert '"approvals_quotarequest"."team_id" IN (' in sql
        assert list(params) == ids
