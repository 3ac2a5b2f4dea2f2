"""The API tokens page: everyone lists, creates and revokes their own tokens (the token shown
once); nobody sees or revokes another's, except platform admins; every change is audited."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from common.errors import PermissionDenied
from portal.models import ApiToken
from portal.tokens import api_token_create, api_token_revoke
from quotas.models import AuditEvent

pytestmark = pytest.mark.django_db


def works(token: str) -> bool:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client.get("/api/v1/teams/").status_code == 200


def test_a_lead_creates_a_token_shown_once_with_the_default_lifetime(client, lead_a, settings):
    settings.API_TOKEN_DEFAULT_DAYS = 90
    client.force_login(lead_a)
    page = client.get("/tokens/")
    assert page.status_code == 200
    assert 'value="90"' in page.content.decode()  # the default lifetime is filled in

    response = client.post("/tokens/", {"name": "ci-pipeline", "days": "90"})
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    html = response.content.decode()
    row = ApiToken.objects.get(user=lead_a)
    token = html.split('data-testid="new-token-value">', 1)[1].split("<", 1)[0]
    assert token.startswith(f"gqp_{row.public_id}_") and works(token)
    assert timedelta(days=89, hours=23) < row.expires_at - timezone.now() <= timedelta(days=90)
    event = AuditEvent.objects.get(action="api_token.create")
    assert (event.actor, event.target_id) == (lead_a, str(row.pk))

    # Shown once: the list shows the name and public id, never the token again.
    listing = client.get("/tokens/").content.decode()
    assert token not in listing
    assert "ci-pipeline" in listing and row.label in listing


def test_the_lifetime_is_bounded_on_the_page(client, lead_a, settings):
    settings.API_TOKEN_MAX_DAYS = 365
    client.force_login(lead_a)
    response = client.post("/tokens/", {"name": "ci", "days": "366"})
    assert response.status_code == 400
    assert "Ensure this value is less than or equal to 365." in response.content.decode()
    response = client.post("/tokens/", {"name": "", "days": "30"})
    assert response.status_code == 400
    assert not ApiToken.objects.exists()


def test_a_lead_revokes_their_own_token(client, lead_a):
    row, token = api_token_create(user=lead_a, name="ci")
    client.force_login(lead_a)
    response = client.post(f"/tokens/{row.pk}/revoke/")
    assert response.status_code == 302
    assert not works(token)
    row.refresh_from_db()
    assert row.revoked_at is not None
    event = AuditEvent.objects.get(action="api_token.revoke")
    assert (event.actor, event.target_id) == (lead_a, str(row.pk))
    assert "revoked" in client.get("/tokens/").content.decode()


def test_nobody_sees_or_revokes_another_users_token(client, lead_a, other_team_lead):
    row, token = api_token_create(user=other_team_lead, name="theirs")
    client.force_login(lead_a)
    assert "theirs" not in client.get("/tokens/").content.decode()
    assert client.post(f"/tokens/{row.pk}/revoke/").status_code == 404
    assert works(token)
    with pytest.raises(PermissionDenied):
        api_token_revoke(token=row, acting_user=lead_a)
    assert works(token)
    assert not AuditEvent.objects.filter(action="api_token.revoke").exists()


def test_a_platform_admin_sees_and_revokes_anyones_token(client, admin, lead_a):
    row, token = api_token_create(user=lead_a, name="lead-ci")
    client.force_login(admin)
    page = client.get("/tokens/").content.decode()
    assert 'data-testid="other-tokens"' in page and "lead-ci" in page
    assert client.post(f"/tokens/{row.pk}/revoke/").status_code == 302
    assert not works(token)
    event = AuditEvent.objects.get(action="api_token.revoke")
    assert (event.actor, event.target_id) == (admin, str(row.pk))


def test_the_admin_action_revokes_through_the_same_service(client, admin, lead_a):
    row, token = api_token_create(user=lead_a, name="ci")
    client.force_login(admin)
    response = client.post(
        "/admin/portal/apitoken/", {"action": "revoke", "_selected_action": [str(row.pk)]}
    )
    assert response.status_code == 302
    assert not works(token)
    event = AuditEvent.objects.get(action="api_token.revoke")
    assert (event.actor, event.comment) == (admin, "revoked in the admin")


def test_revoking_twice_says_so(client, lead_a):
    row, _ = api_token_create(user=lead_a, name="ci")
    client.force_login(lead_a)
    client.post(f"/tokens/{row.pk}/revoke/")
    response = client.post(f"/tokens/{row.pk}/revoke/", follow=True)
    assert f"token {row.label} is revoked already" in response.content.decode()


def test_the_page_needs_a_login(client, db):
    response = client.get("/tokens/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")
