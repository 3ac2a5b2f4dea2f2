"""`manage.py check` refuses single sign-on settings nobody could sign in with."""

import pytest

from portal.sso.checks import sso_settings_check


def ids(settings) -> set[str]:
    return {problem.id for problem in sso_settings_check()}


@pytest.fixture
def complete(settings):
    settings.OIDC_ISSUER = "https://id.example.com"
    settings.OIDC_RP_CLIENT_ID = "portal"
    settings.OIDC_RP_CLIENT_SECRET = "secret"
    settings.OIDC_TEAM_LEAD_GROUP = "team:{slug}:lead"
    settings.OIDC_TEAM_MEMBER_GROUP = ""
    settings.PASSWORD_LOGIN = False
    return settings


def test_a_complete_configuration_passes(complete):
    assert ids(complete) == set()


def test_off_by_default_passes(settings):
    settings.OIDC_ISSUER = ""
    settings.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_SECRET = ""
    settings.PASSWORD_LOGIN = True
    assert ids(settings) == set()


def test_an_issuer_without_client(complete):
    complete.OIDC_RP_CLIENT_ID = ""
    complete.OIDC_RP_CLIENT_SECRET = ""
    assert ids(complete) == {"portal.E102", "portal.E103"}


def test_a_client_without_issuer(complete):
    complete.OIDC_ISSUER = ""
    complete.PASSWORD_LOGIN = True
    assert ids(complete) == {"portal.E107"}


def test_no_way_in_at_all(complete):
    complete.OIDC_ISSUER = ""
    complete.OIDC_RP_CLIENT_ID = complete.OIDC_RP_CLIENT_SECRET = ""
    assert ids(complete) == {"portal.E108"}


@pytest.mark.parametrize("pattern", ["team", "{slug}-{slug}"])
def test_bad_team_patterns(complete, pattern):
    complete.OIDC_TEAM_MEMBER_GROUP = pattern
    problems = sso_settings_check()
    assert [p.id for p in problems] == ["portal.E105"]
    assert "OIDC_TEAM_MEMBER_GROUP" in problems[0].msg


def test_issuer_shapes(complete):
    complete.OIDC_ISSUER = "id.example.com"
    assert ids(complete) == {"portal.E101"}
    complete.OIDC_ISSUER = "http://id.example.com"
    assert ids(complete) == {"portal.W101"}
    complete.OIDC_ISSUER = "http://127.0.0.1:5556/dex"
    assert ids(complete) == set()


def test_an_unreadable_ca_file(complete, tmp_path):
    complete.OIDC_CA_FILE = str(tmp_path / "missing.pem")
    assert ids(complete) == {"portal.E104"}


def test_the_secret_is_never_in_a_message(complete):
    complete.OIDC_RP_CLIENT_ID = ""
    complete.OIDC_RP_CLIENT_SECRET = "do-not-show"
    assert all("do-not-show" not in p.msg for p in sso_settings_check())
