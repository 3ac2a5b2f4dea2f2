"""sso_sign_in on verified claims (what the backend hands it after dex's checks): accounts,
identities and audited roles, without a provider."""

import pytest
from django.contrib.auth.models import User

from portal.models import SsoIdentity
from portal.sso.mapping import GroupMapping
from portal.sso.services import SsoRefused, sso_sign_in
from quotas.models import AuditEvent, Team, TeamMembership
from quotas.roles import is_auditor, is_platform_admin
from tests.support.people import make_user

ISSUER = "https://id.example.com"
MAPPING = GroupMapping(
    admin_groups=frozenset({"admins"}),
    auditor_groups=frozenset({"auditors"}),
    team_lead_pattern="team:{slug}:lead",
    team_member_pattern="team:{slug}:member",
)


def claims(sub="s-1", groups=(), **more):
    return {
        "iss": ISSUER,
        "sub": sub,
        "email": "ann@example.com",
        "email_verified": True,
        "preferred_username": "ann",
        "groups": list(groups),
        **more,
    }


def test_taken_user_names_get_a_number(db):
    make_user("ann")
    make_user("ann-2")
    user = sso_sign_in(claims=claims(), issuer=ISSUER, mapping=MAPPING)
    assert user.username == "ann-3"
    assert SsoIdentity.objects.get(user=user).subject == "s-1"


def test_a_name_from_the_address_when_the_preferred_one_is_taken(db):
    make_user("ann")
    user = sso_sign_in(claims=claims(email="ann.lee@example.com"), issuer=ISSUER, mapping=MAPPING)
    assert user.username == "ann.lee"
    nameless = sso_sign_in(claims={"iss": ISSUER, "sub": "s-9"}, issuer=ISSUER, mapping=MAPPING)
    assert nameless.username == "sso-user"


def test_roles_follow_and_only_configured_ones(db):
    team = Team.objects.create(slug="team-a", name="A")
    user = sso_sign_in(
        claims=claims(groups=["admins", "team:team-a:lead", "team:ghost:lead"]),
        issuer=ISSUER,
        mapping=MAPPING,
    )
    assert is_platform_admin(user) and User.objects.get(pk=user.pk).is_staff
    assert TeamMembership.objects.get(user=user, team=team).role == "lead"
    user = sso_sign_in(
        claims=claims(groups=["auditors", "team:team-a:member"]), issuer=ISSUER, mapping=MAPPING
    )
    fresh = User.objects.get(pk=user.pk)
    assert not is_platform_admin(fresh) and is_auditor(fresh) and fresh.is_staff
    assert TeamMembership.objects.get(user=user, team=team).role == "member"
    changed = AuditEvent.objects.filter(action="membership.changed").get()
    assert changed.before == {"role": "lead", "team": "team-a", "team_id": team.pk, "user": "ann"}

    # Nothing configured: the provider's groups change nothing.
    sso_sign_in(claims=claims(groups=[]), issuer=ISSUER, mapping=GroupMapping())
    fresh = User.objects.get(pk=user.pk)
    assert is_auditor(fresh) and fresh.is_staff
    assert TeamMembership.objects.filter(user=user).count() == 1


def test_a_superuser_keeps_staff_when_the_provider_takes_the_role(db):
    user = sso_sign_in(claims=claims(groups=["admins"]), issuer=ISSUER, mapping=MAPPING)
    User.objects.filter(pk=user.pk).update(is_superuser=True)
    sso_sign_in(claims=claims(groups=[]), issuer=ISSUER, mapping=MAPPING)
    assert User.objects.get(pk=user.pk).is_staff


def test_another_issuer_with_the_same_subject_is_another_person(db):
    one = sso_sign_in(claims=claims(), issuer=ISSUER, mapping=MAPPING)
    other = sso_sign_in(claims=claims(), issuer="https://other.example.com", mapping=MAPPING)
    assert one != other


def test_refusals(db):
    user = sso_sign_in(claims=claims(), issuer=ISSUER, mapping=MAPPING)
    User.objects.filter(pk=user.pk).update(is_active=False)
    with pytest.raises(SsoRefused) as refused:
        sso_sign_in(claims=claims(groups=["admins"]), issuer=ISSUER, mapping=MAPPING)
    assert refused.value.code == "inactive"
    assert not is_platform_admin(User.objects.get(pk=user.pk))  # nothing changed

    for name in ("b1", "b2"):
        u = make_user(name)
        u.email = "bob@example.com"
        u.save()
    with pytest.raises(SsoRefused) as refused:
        sso_sign_in(
            claims=claims(sub="s-2", email="bob@example.com"),
            issuer=ISSUER,
            mapping=MAPPING,
            link_by_email=True,
        )
    assert refused.value.code == "ambiguous_email"
    assert not SsoIdentity.objects.filter(subject="s-2").exists()
