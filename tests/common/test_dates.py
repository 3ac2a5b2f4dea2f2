"""One parser for days and months: malformed and impossible values are refused naming the
field, on pages, in the API and in commands, never a 500."""

from datetime import date

import pytest
from django.core.management import CommandError, call_command

from common.dates import day_or_none, month_or_none, parse_day, parse_month
from common.errors import ValidationFailed
from tests.support.api import as_user

ARABIC_INDIC_2026 = "\u0662\u0660\u0662\u0666"
FULL_WIDTH_2026 = "\uff12\uff10\uff12\uff16"
IMPOSSIBLE_DAYS = [
    "2026-02-30",
    "2026-13-01",
    "2026-11-31",
    "0000-01-01",
    "2026-1-01",
    f"{ARABIC_INDIC_2026}-01-01",
    "2026-01-01T00:00",
]
IMPOSSIBLE_MONTHS = [
    "0000-01",
    "2026-00",
    "2026-13",
    "2026-1",
    f"{FULL_WIDTH_2026}-01",
    "2026-01-01",
]


def test_real_days_and_months_are_read():
    assert parse_day(" 2024-02-29 ", field="start") == date(2024, 2, 29)
    assert parse_month("2025-06") == date(2025, 6, 1)


@pytest.mark.parametrize("text", IMPOSSIBLE_DAYS)
def test_an_impossible_day_is_refused_naming_the_field(text):
    assert day_or_none(text) is None
    with pytest.raises(ValidationFailed) as refused:
        parse_day(text, field="start")
    assert refused.value.extra["field"] == "start"
    assert str(refused.value).startswith("start: give a day as YYYY-MM-DD")


@pytest.mark.parametrize("text", IMPOSSIBLE_MONTHS)
def test_an_impossible_month_is_refused_naming_the_field(text):
    assert month_or_none(text) is None
    with pytest.raises(ValidationFailed) as refused:
        parse_month(text, field="--month")
    assert refused.value.extra["field"] == "--month"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "query", "field"),
    [
        ("/api/v1/suggestions/", {"month": "0000-01"}, "month"),
        ("/api/v1/usage/canary/", {"start": "2026-02-30"}, "start"),
        ("/api/v1/usage/canary/", {"start": "2026-01-01", "end": "2026-13-01"}, "end"),
        ("/api/v1/usage/daily/", {"start": "2026-11-31", "end": "2026-12-01"}, "start"),
        ("/suggestions/", {"month": "0000-01"}, "month"),
        ("/usage/", {"start": "2026-02-30"}, "start"),
    ],
)
def test_pages_and_api_answer_an_impossible_date_with_a_400_naming_it(
    alloc_a, admin, client, path, query, field
):
    query = {**query, "cluster": alloc_a.team_namespace.cluster.name}
    if path.startswith("/api/"):
        response = as_user(admin).get(path, query)
    else:
        client.force_login(admin)
        response = client.get(path, query)
    assert response.status_code == 400, response.content[:300]
    if path.startswith("/api/"):
        assert response.json()["extra"]["field"] == field
    else:
        assert f"{field}: give a" in response.content.decode()


@pytest.mark.django_db
def test_commands_refuse_an_impossible_day_or_month(cluster):
    with pytest.raises(CommandError, match="--from"):
        call_command(
            "collect_usage",
            "--cluster",
            cluster.name,
            "--from",
            "2026-02-30T00:00",
            "--to",
            "2026-03-01",
        )
    with pytest.raises((CommandError, ValidationFailed), match="--month"):
        call_command("suggest_quotas", "--cluster", cluster.name, "--month", "0000-01")
