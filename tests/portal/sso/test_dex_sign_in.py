"""Single sign-on against a real provider (dex on loopback, tests/portal/sso/conftest.py): the
code flow with state, nonce and PKCE, the account and identity it makes, the roles the groups
give and take (audited), and every refusal ending on the login page."""

from __future__ import annotations

import dataclasses

import pytest
from django.contrib import auth
from django.contrib.auth.models import User
from django.contrib.messages import get_messages

from controlplane.sso_provider import DexProvider
from portal.models import SsoIdentity
from portal.sso.backends import PASSWORD_BACKEND, SSO_BACKEND
from quotas.models import AuditEvent, Team, TeamMembership
from quotas.roles import is_auditor, is_platform_admin
from tests.support.people import make_user
from tests.support.sso import (
    ANN,
    BOB,
    CALLBACK,
    callback_path,
    point_portal_at,
    provider_round_trip,
    require_dex,
)


@pytest.fixture
def teams(db):
    return (
        Team.objects.create(slug="team-a", name="Team A"),
        Team.objects.create(slug="team-b", name="Team B"),
    )


def _roles(user: User) -> dict:
    user = User.objects.get(pk=user.pk)
    return {
        "admin": is_platform_admin(user),
        "auditor": is_auditor(user),
        "staff": user.is_staff,
        "teams": dict(TeamMembership.objects.filter(user=user).values_list("team__slug", "role")),
    }


def _messages(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_first_sign_in_makes_the_account_identity_and_roles(client, sso, sign_in, teams):
    before = AuditEvent.objects.count()
    response = sign_in(client, ANN, next="/requests/")
    assert response.status_code == 302 and response["Location"] == "/requests/"

    user = User.objects.get(username="ann")
    assert user.email == "ann@example.com"
    assert (user.first_name, user.last_name) == ("Ann", "Lee")
    assert not user.has_usable_password()
    identity = SsoIdentity.objects.get(user=user)
    assert identity.issuer == sso.issuer and identity.subject
    assert identity.last_login_at is not None
    assert _roles(user) == {
        "admin": True,
        "auditor": False,
        "staff": True,
        "teams": {"team-a": "lead", "team-b": "member"},  # no-such-team is ignored
    }
    assert client.session[auth.BACKEND_SESSION_KEY] == SSO_BACKEND
    assert client.get("/").wsgi_request.user == user

    actions = list(AuditEvent.objects.order_by("seq")[before:].values_list("action", "target_type"))
    assert ("user.created", "User") in actions
    assert ("user.changed", "User") in actions  # the role group and is_staff
    assert ("sso_identity.created", "SsoIdentity") in actions
    assert actions.count(("membership.created", "TeamMembership")) == 2
    assert all(
        e.actor is None and "single sign-on" in e.comment
        for e in AuditEvent.objects.order_by("seq")[before:]
    )
    # The API, in the session single sign-on opened, lists the new identity's event.
    listed = client.get("/api/v1/audit-events/", {"action": "sso_identity.created"})
    assert listed.status_code == 200
    assert [e["target_type"] for e in listed.json()["results"]] == ["SsoIdentity"]


def test_next_sign_in_follows_the_groups_and_keeps_the_user(client, sso, sign_in, teams):
    sign_in(client, ANN)
    ann = User.objects.get(username="ann")
    changed = dataclasses.replace(
        ANN, email="ann.lee@example.org", groups=("portal-auditors", "team:team-b:lead")
    )
    sso.restart(users=[changed, BOB])
    client.logout()
    response = sign_in(client, changed)
    assert response.status_code == 302

    assert User.objects.filter(username__startswith="ann").count() == 1
    ann.refresh_from_db()
    assert ann.email == "ann.lee@example.org"  # the same person: same issuer and subject
    assert _roles(ann) == {
        "admin": False,
        "auditor": True,
        "staff": True,
        "teams": {"team-b": "lead"},
    }
    recent = set(AuditEvent.objects.order_by("-seq")[:6].values_list("action", flat=True))
    assert {"membership.deleted", "membership.changed", "user.changed"} <= recent

    # No group left: every mapped role goes, and with it the admin's staff flag.
    sso.restart(users=[dataclasses.replace(changed, groups=()), BOB])
    client.logout()
    sign_in(client, changed)
    assert _roles(ann) == {"admin": False, "auditor": False, "staff": False, "teams": {}}


def test_unmapped_roles_stay_as_the_admins_set_them(client, sso, sign_in, teams, settings):
    settings.OIDC_ADMIN_GROUPS = []
    settings.OIDC_TEAM_LEAD_GROUP = ""
    settings.OIDC_TEAM_MEMBER_GROUP = ""
    sign_in(client, BOB)
    bob = User.objects.get(username="bob")
    TeamMembership.objects.create(team=teams[0], user=bob, role="lead")
    client.logout()
    sign_in(client, BOB)
    assert _roles(bob)["teams"] == {"team-a": "lead"}


def test_a_local_account_with_the_address_is_not_taken_over(client, sso, sign_in):
    local = make_user("ann-local")
    local.email = "ann@example.com"
    local.save()
    sign_in(client, ANN)
    assert client.get("/").wsgi_request.user != local
    assert SsoIdentity.objects.get().user.username == "ann"
    assert not SsoIdentity.objects.filter(user=local).exists()


def test_linking_by_verified_address_when_asked(client, sso, sign_in, settings):
    settings.OIDC_LINK_BY_EMAIL = True
    local = make_user("ann-local")
    local.email = "ANN@example.com"
    local.save()
    sign_in(client, ANN)
    assert SsoIdentity.objects.get().user == local
    assert client.get("/").wsgi_request.user == local
    event = AuditEvent.objects.get(action="sso_identity.created")
    assert event.after["linked_by"] == "verified e-mail address"


def test_linking_refuses_an_address_two_accounts_have(client, sso, sign_in, settings):
    settings.OIDC_LINK_BY_EMAIL = True
    for name in ("ann-1", "ann-2"):
        u = make_user(name)
        u.email = "ann@example.com"
        u.save()
    response = sign_in(client, ANN)
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert any("More than one account" in m for m in _messages(response))
    assert not SsoIdentity.objects.exists()
    assert auth.SESSION_KEY not in client.session


def test_an_unverified_address_is_never_linked(client, sso, sign_in, settings):
    settings.OIDC_LINK_BY_EMAIL = True
    unverified = dataclasses.replace(ANN, email_verified=False, groups=())
    sso.restart(users=[unverified])
    local = make_user("ann-local")
    local.email = "ann@example.com"
    local.save()
    sign_in(client, unverified)
    assert SsoIdentity.objects.get().user.username == "ann"


def test_a_deactivated_user_is_refused(client, sso, sign_in):
    sign_in(client, BOB)
    User.objects.filter(username="bob").update(is_active=False)
    client.logout()
    response = sign_in(client, BOB)
    assert response["Location"] == "/login/"
    assert any("deactivated" in m for m in _messages(response))
    assert auth.SESSION_KEY not in client.session


def test_a_tampered_or_replayed_state_is_refused(client, sso):
    start = client.get("/sso/login/")
    back = provider_round_trip(start["Location"], BOB.email)
    path = callback_path(back)
    tampered = path.replace("state=", "state=x")
    response = client.get(tampered)
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert any("expired or was started in another window" in m for m in _messages(response))
    assert auth.SESSION_KEY not in client.session
    assert not User.objects.filter(username="bob").exists()
    # The state is spent only when it is used; this one was not, so it still signs in once...
    assert client.get(path)["Location"] == "/"
    client.logout()
    # ...and a replay of the same callback finds no state.
    replay = client.get(path)
    assert replay["Location"] == "/login/"
    assert auth.SESSION_KEY not in client.session


def test_another_browser_cannot_finish_a_sign_in(client, sso, django_user_model):
    from django.test import Client

    start = client.get("/sso/login/")
    back = provider_round_trip(start["Location"], BOB.email)
    other = Client()
    response = other.get(callback_path(back))
    assert response["Location"] == "/login/"
    assert auth.SESSION_KEY not in other.session


def test_the_providers_error_ends_on_the_login_page(client, sso):
    start = client.get("/sso/login/")
    state = dict(p.split("=", 1) for p in start["Location"].split("?", 1)[1].split("&"))["state"]
    response = client.get("/sso/callback/", {"error": "access_denied", "state": state})
    assert response["Location"] == "/login/"
    assert any("did not sign you in" in m for m in _messages(response))
    page = client.get("/login/")
    assert page.status_code == 200


def test_a_wrong_client_secret_is_a_message_not_a_500(client, sso, settings, caplog):
    settings.OIDC_RP_CLIENT_SECRET = "not-the-secret"
    start = client.get("/sso/login/")
    back = provider_round_trip(start["Location"], BOB.email)
    response = client.get(callback_path(back))
    assert response["Location"] == "/login/"
    assert any("could not be verified" in m for m in _messages(response))
    code = dict(p.split("=", 1) for p in back.split("?", 1)[1].split("&"))["code"]
    assert code not in caplog.text and "not-the-secret" not in caplog.text
    assert sso.client_secret not in caplog.text


def test_a_discovery_document_of_another_issuer_is_refused(client, sso, settings):
    settings.OIDC_ISSUER = sso.issuer.replace("127.0.0.1", "localhost")
    response = client.get("/sso/login/")
    assert response["Location"] == "/login/"
    assert any("cannot be reached" in m for m in _messages(response))


def test_an_open_redirect_in_next_goes_home(client, sso, sign_in):
    response = sign_in(client, BOB, next="https://evil.example.com/")
    assert response["Location"] == "/"


def test_logout_ends_the_session(client, sso, sign_in):
    sign_in(client, BOB)
    response = client.post("/logout/")
    assert response["Location"] == "/login/"  # dex has no end-session endpoint
    assert auth.SESSION_KEY not in client.session


def test_logout_ends_at_the_providers_end_session_endpoint(client, sso, sign_in, settings):
    settings.OIDC_OP_LOGOUT_ENDPOINT = sso.issuer + "/logout"
    sign_in(client, BOB)
    assert client.session.get("oidc_id_token")
    response = client.post("/logout/")
    location = response["Location"]
    assert location.startswith(sso.issuer + "/logout?")
    assert "id_token_hint=" in location
    assert "post_logout_redirect_uri=http%3A%2F%2Ftestserver%2Flogin%2F" in location
    assert auth.SESSION_KEY not in client.session


def test_without_password_login_only_single_sign_on_opens_a_session(client, sso, sign_in, settings):
    from django.test import Client

    old = Client()
    old.force_login(make_user("local"), backend=PASSWORD_BACKEND)  # while passwords were on
    assert old.get("/requests/").status_code == 200

    settings.PASSWORD_LOGIN = False
    page = client.get("/login/")
    assert b'name="password"' not in page.content and b"Sign in with dex" in page.content
    refused = client.post("/login/", {"username": "local", "password": "pw"})
    assert refused.status_code == 403
    assert auth.SESSION_KEY not in client.session
    admin_login = client.post("/admin/login/", {"username": "local", "password": "pw"})
    assert admin_login["Location"].startswith("/login/")  # the portal's, without a form
    assert auth.SESSION_KEY not in client.session

    ended = old.get("/requests/")
    assert ended.status_code == 302 and ended["Location"].startswith("/login/")
    assert auth.SESSION_KEY not in old.session

    assert sign_in(client, BOB)["Location"] == "/"
    assert client.get("/requests/").status_code == 200


def test_the_discovery_document_is_kept_then_read_again(client, sso, sign_in, settings):
    from django.core.cache import cache

    sign_in(client, BOB)
    client.logout()
    sso.stop()
    start = client.get("/sso/login/")  # the endpoints as kept: no request to the provider
    assert start["Location"].startswith(sso.issuer + "/auth?")
    cache.clear()
    refused = client.get("/sso/login/")
    assert refused["Location"] == "/login/"
    assert any("cannot be reached" in m for m in _messages(refused))


def test_an_https_provider_is_trusted_through_its_ca_file(client, settings, db, tmp_path):
    require_dex()
    with DexProvider(
        tmp_path / "dex-tls", client_redirect_uris=[CALLBACK], users=[BOB], tls=True
    ) as dex:
        point_portal_at(settings, dex)
        refused = client.get("/sso/login/")  # the system's CAs do not know this one
        assert refused["Location"] == "/login/"
        settings.OIDC_CA_FILE = str(dex.ca_file)
        start = client.get("/sso/login/")
        assert start["Location"].startswith("https://127.0.0.1:")
        back = provider_round_trip(start["Location"], BOB.email, verify=str(dex.ca_file))
        assert client.get(callback_path(back))["Location"] == "/"  # code, keys and token by TLS
        assert client.session[auth.BACKEND_SESSION_KEY] == SSO_BACKEND
