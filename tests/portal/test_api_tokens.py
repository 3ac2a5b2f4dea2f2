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
from portal.tokens import api_token_create, api_token_hash, api_token_revoke

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


def test_token_is_stored_only_as_its_hash_and_its_public_id(lead_a):
    token = create_token("lead-a", "--name", "ci")
    row = ApiToken.objects.get()
    prefix, public_id, secret = token.split("_", 2)
    assert (prefix, row.public_id, row.label) == ("gqp", public_id, f"gqp_{public_id}")
    assert len(secret) >= 43
    assert len(row.token_hash) == 64 and row.token_hash != token
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM portal_apitoken")
        stored = " ".join(str(value) for value in cursor.fetchone())
    assert token not in stored
    # Not even a few characters of the secret are kept (the old prefix held four).
    assert all(secret[i : i + 4] not in stored for i in range(len(secret) - 3))


def test_last_used_at_is_set(lead_a):
    token = create_token("lead-a", "--name", "ci")
    assert ApiToken.objects.get().last_used_at is None
    assert bearer(token).get("/api/v1/allocations/").status_code == 200
    assert ApiToken.objects.get().last_used_at is not None


def test_a_token_expires_after_the_default_lifetime_unless_asked(lead_a, settings):
    settings.API_TOKEN_DEFAULT_DAYS = 90
    create_token("lead-a", "--name", "ci")
    expires = ApiToken.objects.get().expires_at
    assert timedelta(days=89, hours=23) < expires - timezone.now() <= timedelta(days=90)


def test_a_lifetime_past_the_maximum_is_refused(lead_a, settings):
    settings.API_TOKEN_MAX_DAYS = 365
    with pytest.raises(
        CommandError, match=r"days must be at most 365 \(API_TOKEN_MAX_DAYS\), got 366"
    ):
        create_token("lead-a", "--name", "ci", "--days", "366")
    assert not ApiToken.objects.exists()


def test_old_format_tokens_keep_working_without_revealing_secret_characters(lead_a):
    """Tokens made before public ids (gqp_ + secret) still authenticate after the migration."""
    old = "gqp_" + "A" * 43
    row = ApiToken.objects.create(
        user=lead_a,
        name="old",
        token_hash=api_token_hash(old),
        expires_at=timezone.now() + timedelta(days=1),
    )
    assert bearer(old).get("/api/v1/teams/").status_code == 200
    assert row.label == f"old-format token #{row.pk}"


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
    api_token_revoke(token=row, acting_user=lead_a)
    response = bearer(token).get("/api/v1/teams/")
    assert response.status_code == 401
    assert response.json()["message"] == f"API token {row.label} was revoked"


def test_expired_token_is_401(lead_a):
    row, token = api_token_create(user=lead_a, name="ci", days=1)
    ApiToken.objects.filter(pk=row.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = bearer(token).get("/api/v1/teams/")
    assert response.status_code == 401
    assert response.json()["message"].startswith(f"API token {row.label} expired at ")


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
        assert row.label in page
    assert client.get("/admin/portal/apitoken/add/").status_code == 403
