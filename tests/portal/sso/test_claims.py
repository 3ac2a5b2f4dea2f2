"""The provider's claims read as the portal needs them: pure functions, no database."""

import pytest

from portal.sso.claims import (
    MAX_GROUPS,
    groups_from_claim,
    id_token_problem,
    profile_from_claims,
    username_candidates,
)

ISSUER = "https://id.example.com"
CLIENT = "portal"
GOOD = {"iss": ISSUER, "aud": CLIENT, "sub": "abc", "exp": 2_000_000_000}


def test_a_token_for_this_client_has_no_problem():
    assert id_token_problem(GOOD, issuer=ISSUER, client_id=CLIENT) is None
    assert id_token_problem({**GOOD, "aud": [CLIENT]}, issuer=ISSUER, client_id=CLIENT) is None


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"iss": "https://evil.example.com"}, "issuer"),
        ({"iss": ISSUER + "/"}, "issuer"),
        ({"aud": "other"}, "aud"),
        ({"aud": ["other"]}, "aud"),
        ({"aud": 5}, "aud"),
        ({"aud": [CLIENT, "other"]}, "azp"),  # several audiences need azp = this client
        ({"aud": [CLIENT, "other"], "azp": "other"}, "azp"),
        ({"azp": "other"}, "azp"),
        ({"sub": ""}, "sub"),
        ({"sub": 7}, "sub"),
        ({"sub": "x" * 256}, "sub"),
        ({"exp": "tomorrow"}, "exp"),
    ],
)
def test_a_token_not_for_this_client_is_refused(change, named):
    problem = id_token_problem({**GOOD, **change}, issuer=ISSUER, client_id=CLIENT)
    assert problem is not None and named in problem


def test_several_audiences_with_this_client_as_azp_pass():
    claims = {**GOOD, "aud": [CLIENT, "other"], "azp": CLIENT}
    assert id_token_problem(claims, issuer=ISSUER, client_id=CLIENT) is None


def test_groups_in_any_shape():
    assert groups_from_claim(None) == ([], [])
    assert groups_from_claim("admins") == (["admins"], [])
    assert groups_from_claim([" a ", "b"]) == (["a", "b"], [])
    groups, problems = groups_from_claim(["a", 5, "", "x" * 300])
    assert groups == ["a"] and len(problems) == 3
    groups, problems = groups_from_claim({"a": 1})
    assert groups == [] and "dict" in problems[0]
    groups, problems = groups_from_claim([f"g{i}" for i in range(MAX_GROUPS + 5)])
    assert len(groups) == MAX_GROUPS and problems


def test_profile_keeps_only_usable_values():
    profile = profile_from_claims(
        {"email": "Ann@Example.com", "email_verified": True, "name": "Ann Lee Smith"}
    )
    assert profile.email == "Ann@Example.com" and profile.email_verified
    assert (profile.first_name, profile.last_name) == ("Ann", "Lee Smith")
    bad = profile_from_claims({"email": "not-an-address", "email_verified": "true", "name": 5})
    assert bad.email == "" and bad.email_verified is False  # only a JSON true counts
    assert (bad.first_name, bad.last_name) == ("", "")
    given = profile_from_claims({"given_name": "A" * 400, "family_name": "B"})
    assert len(given.first_name) == 150 and given.last_name == "B"


def test_username_candidates_best_first():
    claims = {"preferred_username": "ann lee", "email": "ann.lee@example.com"}
    assert username_candidates(claims) == ["ann-lee", "ann.lee", "sso-user"]
    assert username_candidates({}) == ["sso-user"]
    assert username_candidates({"preferred_username": "///"}) == ["sso-user"]
    long = username_candidates({"preferred_username": "a" * 500})[0]
    assert len(long) <= 142  # room for a number added to a taken name
