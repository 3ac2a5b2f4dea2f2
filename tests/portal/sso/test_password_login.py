"""The password's way in and its switch (PASSWORD_LOGIN), and the login page's buttons: no
provider needed."""

import pytest
from django.contrib import auth
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from portal.sso.backends import PASSWORD_BACKEND, SSO_BACKEND
from portal.tokens import api_token_create
from tests.support.people import make_user


@pytest.fixture
def sso_on(settings):
    settings.OIDC_ISSUER = "https://id.example.com"
    settings.SSO_ENABLED = True
    settings.OIDC_PROVIDER_NAME = "Example ID"
    settings.OIDC_RP_CLIENT_ID = "portal"
    settings.OIDC_RP_CLIENT_SECRET = "s3cret-value"
    return settings


def test_password_sign_in_records_its_backend(client, db):
    make_user("local")
    response = client.post("/login/", {"username": "local", "password": "pw"})
    assert response.status_code == 302
    assert client.session[auth.BACKEND_SESSION_KEY] == PASSWORD_BACKEND


def test_an_account_without_a_usable_password_cannot_use_one(client, db):
    user = User.objects.create_user("sso-only", "s@example.com")
    assert not user.has_usable_password()
    for password in ("", "!", user.password):
        response = client.post("/login/", {"username": "sso-only", "password": password})
        assert auth.SESSION_KEY not in client.session, password
        assert response.status_code == 200


def test_a_session_of_an_account_without_a_usable_password_stays_valid(client, db):
    """Not usable for a password is not refused its session (one an admin opened for it, a
    benchmark's): only the password check refuses such an account."""
    user = User.objects.create_user("no-password")
    user.set_unusable_password()
    user.save()
    client.force_login(user, backend=PASSWORD_BACKEND)
    assert client.get("/").status_code == 200
    assert auth.get_user(client).pk == user.pk


def test_the_login_page_offers_what_is_on(client, db, sso_on):
    page = client.get("/login/?next=/requests/").content.decode()
    assert 'href="/sso/login/?next=/requests/"' in page
    assert "Sign in with Example ID" in page and 'name="password"' in page
    assert "s3cret-value" not in page
    sso_on.PASSWORD_LOGIN = False
    page = client.get("/login/").content.decode()
    assert "Sign in with Example ID" in page and 'name="password"' not in page


def test_the_login_page_in_chinese(client, db, sso_on):
    sso_on.PASSWORD_LOGIN = False
    page = client.get("/login/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "Example ID" in page and "Sign in with" not in page


def test_without_sso_the_page_has_no_button_and_its_views_are_404(client, db):
    assert b"/sso/login/" not in client.get("/login/").content
    assert client.get("/sso/login/").status_code == 404
    assert client.get("/sso/callback/?code=a&state=b").status_code == 404


def test_password_off_refuses_the_form_and_ends_password_sessions(client, db, sso_on):
    user = make_user("local")
    client.force_login(user, backend=PASSWORD_BACKEND)
    assert client.get("/requests/").status_code == 200
    sso_on.PASSWORD_LOGIN = False
    response = client.get("/requests/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert auth.SESSION_KEY not in client.session
    refused = client.post("/login/", {"username": "local", "password": "pw"})
    assert refused.status_code == 403
    assert "turned off" in refused.content.decode()
    assert auth.SESSION_KEY not in client.session


def test_password_off_keeps_single_sign_on_sessions(client, db, sso_on):
    sso_on.PASSWORD_LOGIN = False
    user = make_user("via-sso")
    client.force_login(user, backend=SSO_BACKEND)
    assert client.get("/requests/").status_code == 200
    assert client.session[auth.SESSION_KEY] == str(user.pk)


def test_password_off_keeps_api_tokens_working(db, sso_on):
    sso_on.PASSWORD_LOGIN = False
    user = make_user("robot")
    _row, token = api_token_create(user=user, name="ci")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert api.get("/api/v1/teams/").status_code == 200


def test_password_off_refuses_the_admin_login(client, admin, sso_on):
    sso_on.PASSWORD_LOGIN = False
    response = client.post("/admin/login/", {"username": "admin", "password": "pw"})
    assert response.status_code == 302
    assert response["Location"] == "/login/?next=%2Fadmin%2F"
    assert auth.SESSION_KEY not in client.session
    page = client.get("/admin/login/?next=/admin/quotas/team/")
    assert page["Location"] == "/login/?next=%2Fadmin%2Fquotas%2Fteam%2F"
    # The backend refuses the password whatever form brings it.
    assert auth.authenticate(page.wsgi_request, username="admin", password="pw") is None


def test_with_passwords_on_the_admin_login_is_the_admins(client, admin):
    response = client.post("/admin/login/", {"username": "admin", "password": "pw"})
    assert response.status_code == 302 and auth.SESSION_KEY in client.session


def test_single_sign_on_identities_are_read_only_in_the_admin(client, admin):
    client.force_login(admin)
    assert client.get("/admin/portal/ssoidentity/").status_code == 200
    assert client.get("/admin/portal/ssoidentity/add/").status_code == 403


def test_the_callback_is_never_reached_by_a_password_form(db, sso_on, rf):
    # The single sign-on backend takes only the callback's keywords: a password's credentials
    # never reach it.
    user = make_user("local")
    request = rf.post("/login/")
    assert auth.authenticate(request, username="local", password="pw") == user
    sso_on.PASSWORD_LOGIN = False
    assert auth.authenticate(request, username="local", password="pw") is None
