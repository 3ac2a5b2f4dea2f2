"""Personal API tokens: made by the command, shown once, stored only as a hash."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from portal.models import ApiToken
from portal.tokens import api_token_create, api_token_revoke

pytestmark = pytest.mark.django_db


def create_token(username: str, *args: str) -> str:
    out, err = StringIO(), StringIO()
    call_command("create_api_token", username, *args, stdout=out, stderr=err)
    return out.getvalue().strip()


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def test_command_prints_the_token_once_and_it_works(lead_a):
    out, err = StringIO(), StringIO()
    call_command("create_api_token", "lead-a", "--name", "ci", stdout=out, stderr=err)
    token = out.getvalue().strip()
    assert token.startswith("gqp_") and len(token) > 40
    assert (out.getvalue() + err.getvalue()).count(token) == 1
    assert "cannot be shown again" in err.getvalue()

    response = bearer(token).get("/api/v1/teams/")
    assert response.status_code == 200
    assert [t["slug"] for t in response.json()["results"]] == ["team-a"]


def test_token_is_stored_only_as_its_hash(lead_a):
    token = create_token("lead-a", "--name", "ci")
    row = ApiToken.objects.get()
    assert row.prefix == token[:8]
    assert len(row.token_hash) == 64 and row.token_hash != token
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM portal_apitoken")
        stored = " ".join(str(value) for value in cursor.fetchone())
    assert token not in stored
    assert token[8:] not in stored


def test_last_used_at_is_set(lead_a):
    token = create_token("lead-a", "--name", "ci")
    assert ApiToken.objects.get().last_used_at is None
    assert bearer(token).get("/api/v1/allocations/").status_code == 200
    assert ApiToken.objects.get().last_used_at is not None


def test_days_sets_the_expiry(lead_a):
    create_token("lead-a", "--name", "ci", "--days", "30")
    expires = ApiToken.objects.get().expires_at
    assert timedelta(days=29) < expires - timezone.now() <= timedelta(days=30)


def test_command_refuses_unknown_user(db):
    with pytest.raises(CommandError, match="no user 'ghost'"):
        create_token("ghost", "--name", "ci")


@pytest.mark.parametrize("token", ["gqp_wrong", "nonsense", "gqp_" + "x" * 43])
def test_wrong_token_is_401(lead_a, token):
    create_token("lead-a", "--name", "ci")
    response = bearer(token).get("/api/v1/teams/")
    assert response.status_code == 401
    assert response.json() == {
        "message": "invalid API token",
        "extra": {"code": "authentication_failed"},
    }


def test_revoked_token_is_401(lead_a):
    row, token = api_token_create(user=lead_a, name="ci")
    api_token_revoke(token=row)
    response = bearer(token).get("/api/v1/teams/")
    assert response.status_code == 401
    assert response.json()["message"] == f"API token {token[:8]}… was revoked"


def test_expired_token_is_401(lead_a):
    row, token = api_token_create(user=lead_a, name="ci", days=1)
    ApiToken.objects.filter(pk=row.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = bearer(token).get("/api/v1/teams/")
    assert response.status_code == 401
    assert response.json()["message"].startswith(f"API token {token[:8]}… expired at ")


def test_inactive_user_is_401(lead_a):
    _, token = api_token_create(user=lead_a, name="ci")
    lead_a.is_active = False
    lead_a.save()
    response = bearer(token).get("/api/v1/teams/")
    assert response.status_code == 401
    assert "inactive" in response.json()["message"]


def test_no_credentials_is_401_with_a_bearer_challenge(db):
    response = APIClient().get("/api/v1/teams/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert set(response.json()) == {"message", "extra"}


def test_admin_pages_never_show_the_hash(client, admin, lead_a):
    row, token = api_token_create(user=lead_a, name="ci")
    client.force_login(admin)
    for url in ("/admin/portal/apitoken/", f"/admin/portal/apitoken/{row.pk}/change/"):
        response = client.get(url)
        assert response.status_code == 200, url
        page = response.content.decode()
        assert row.token_hash not in page
        assert token not in page
        assert row.prefix in page
    assert client.get("/admin/portal/apitoken/add/").status_code == 403
