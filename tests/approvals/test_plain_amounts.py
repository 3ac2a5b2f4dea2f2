"""Amounts are plain ASCII decimals, in the request form and the API: "3_0" is not 30 and an
Arabic-Indic three is not 3 (Python's Decimal takes both); such input is refused naming the
field, and nothing is stored."""

import pytest

from approvals.models import QuotaRequest
from tests.support.api import as_user, body
from tests.support.requests import line_data

pytestmark = pytest.mark.django_db

ARABIC_INDIC_THREE = "\u0663"
NOT_PLAIN = ["3_0", ARABIC_INDIC_THREE, "1e1", "Infinity", " 3 4", "0x10", "\uff13"]


@pytest.mark.parametrize("text", NOT_PLAIN)
def test_the_api_refuses_an_amount_that_is_not_plain_digits(plan, gpu, lead_c, text):
    response = as_user(lead_c).post("/api/v1/requests/", body(guarantee=text), format="json")
    assert response.status_code == 400, response.content
    assert response.json()["extra"]["field"] == "lines[0].guarantee"
    assert "plain digits" in response.json()["message"]
    assert not QuotaRequest.objects.exists()


@pytest.mark.parametrize("text", NOT_PLAIN)
def test_the_form_refuses_an_amount_that_is_not_plain_digits(client, plan, gpu, lead_c, text):
    client.force_login(lead_c)
    response = client.post("/requests/new/", line_data(plan["team-c"], gpu, 1, text))
    assert response.status_code == 400  # the form again, with the error on the field
    assert "plain digits" in response.content.decode()
    assert not QuotaRequest.objects.exists()


@pytest.mark.parametrize(("text", "stored"), [("3", "3"), ("3.000", "3"), (" 4 ", "4"), (2, "2")])
def test_plain_amounts_and_json_numbers_are_taken(plan, gpu, lead_c, strict_policy, text, stored):
    response = as_user(lead_c).post("/api/v1/requests/", body(guarantee=text), format="json")
    assert response.status_code == 201, response.content
    assert response.json()["lines"][0]["requested"]["guarantee"] == stored


def test_a_boolean_is_not_an_amount(plan, gpu, lead_c, strict_policy):
    refused = as_user(lead_c).post("/api/v1/requests/", body(guarantee=True), format="json")
    assert refused.status_code == 400
