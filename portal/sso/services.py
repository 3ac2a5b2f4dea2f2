"""A sign-in by single sign-on as one change: the user found by their identity at the provider
(issuer, subject) or made for it, their profile as the provider has it, and the roles its
groups give, each role change through the service that audits it (quotas.people for users and
role groups, quotas.teams for memberships), in one transaction."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.contrib.auth.models import Group, User
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from portal.models import SsoIdentity
from portal.sso.claims import Profile, groups_from_claim, profile_from_claims, username_candidates
from portal.sso.mapping import LEAD, MEMBER, GroupMapping, WantedRoles, roles_from_groups
from quotas.audit.chain import audit_record
from quotas.models import Team, TeamMembership
from quotas.people import user_save
from quotas.roles import AUDITORS, PLATFORM_ADMINS, ensure_role_groups
from quotas.teams import team_membership_delete, team_membership_save

logger = logging.getLogger(__name__)


class SsoRefused(Exception):
    """A sign-in the portal does not accept. ``code`` picks the message the login page shows;
    ``detail`` is for the log (never a token, a code or the client secret)."""

    MESSAGES = {
        "inactive": _("Your account in the portal is deactivated. Ask a platform admin."),
        "ambiguous_email": _(
            "More than one account in the portal has your e-mail address: ask a platform admin "
            "to link your sign-in to one of them."
        ),
        "token": _("The sign-in could not be verified. Please try again."),
        "provider": _("The sign-in provider cannot be reached right now. Please try again later."),
        "state": _("The sign-in expired or was started in another window. Please try again."),
        "denied": _("The sign-in provider did not sign you in."),
        "off": _("Single sign-on is not configured."),
    }

    def __init__(self, code: str, detail: str = ""):
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code = code if code in self.MESSAGES else "token"
        self.detail = detail

    @property
    def message(self) -> str:
        return str(self.MESSAGES[self.code])


def _comment(issuer: str) -> str:
    return f"single sign-on ({issuer})"


def _free_username(claims: Mapping[str, Any]) -> str:
    """The first name the claims suggest that nobody has, else the first with the lowest
    free number ("ann-2"); "sso-user" only when the claims suggest none."""
    candidates = username_candidates(claims)
    suggested = candidates[:-1] or candidates
    taken = set(User.objects.filter(username__in=suggested).values_list("username", flat=True))
    for name in suggested:
        if name not in taken:
            return name
    base = suggested[0]
    numbered = set(
        User.objects.filter(username__startswith=f"{base}-").values_list("username", flat=True)
    )
    n = 2
    while f"{base}-{n}" in numbered:
        n += 1
    return f"{base}-{n}"


def _linked_by_email(profile: Profile) -> User | None:
    """The one local account with this verified address, else None (refused when several)."""
    if not (profile.email and profile.email_verified):
        return None
    found = list(User.objects.filter(email__iexact=profile.email)[:2])
    if len(found) > 1:
        raise SsoRefused("ambiguous_email", "several accounts have the verified e-mail address")
    return found[0] if found else None


def _wanted_groups(user: User, wanted: WantedRoles) -> tuple[list[Group], bool | None]:
    """The user's groups with the provider's roles applied, and what is_staff becomes (None:
    unchanged): on with a role the admin serves, off when this sign-in took the last one."""
    admins, auditors = ensure_role_groups()
    groups = {g.pk: g for g in user.groups.all()}
    had_role = any(g.name in (PLATFORM_ADMINS, AUDITORS) for g in groups.values())
    for group, on in ((admins, wanted.admin), (auditors, wanted.auditor)):
        if on is True:
            groups[group.pk] = group
        elif on is False:
            groups.pop(group.pk, None)
    has_role = any(g.name in (PLATFORM_ADMINS, AUDITORS) for g in groups.values())
    if wanted.admin is None and wanted.auditor is None:
        staff = None  # neither role is the provider's: nor is the flag that goes with them
    elif has_role:
        staff = True
    else:
        staff = False if had_role and not user.is_superuser else None
    return list(groups.values()), staff


def _apply_profile_and_roles(
    user: User, profile: Profile, wanted: WantedRoles, *, comment: str
) -> None:
    changed = False
    for field in ("email", "first_name", "last_name"):
        value = getattr(profile, field)
        if value and getattr(user, field) != value:
            setattr(user, field, value)
            changed = True
    groups, staff = _wanted_groups(user, wanted)
    if staff is not None and user.is_staff != staff:
        user.is_staff = staff
        changed = True
    if {g.pk for g in groups} != {g.pk for g in user.groups.all()}:
        changed = True
    if changed:
        user_save(user=user, groups=groups, acting_user=None, comment=comment)


def _apply_team_roles(user: User, wanted: WantedRoles, mapping: GroupMapping, comment: str):
    if wanted.teams is None:
        return
    managed = set()
    if mapping.team_lead_pattern:
        managed.add(LEAD)
    if mapping.team_member_pattern:
        managed.add(MEMBER)
    teams = {t.slug: t for t in Team.objects.filter(slug__in=list(wanted.teams))}
    unknown = sorted(set(wanted.teams) - set(teams))
    if unknown:
        logger.info(
            "single sign-on of %s: groups name teams the portal does not have, ignored: %s",
            user.get_username(),
            ", ".join(unknown[:20]),
        )
    memberships = {
        m.team.slug: m
        for m in TeamMembership.objects.filter(user=user).select_related("team", "user")
    }
    for slug, membership in memberships.items():
        role = wanted.teams.get(slug)
        if role is None:
            if membership.role in managed:
                team_membership_delete(membership=membership, acting_user=None, comment=comment)
        elif membership.role != role:
            membership.role = role
            team_membership_save(membership=membership, acting_user=None, comment=comment)
    for slug, team in sorted(teams.items()):
        if slug not in memberships:
            team_membership_save(
                membership=TeamMembership(team=team, user=user, role=wanted.teams[slug]),
                acting_user=None,
                comment=comment,
            )


def _sign_in_once(
    *,
    claims: Mapping[str, Any],
    issuer: str,
    mapping: GroupMapping,
    link_by_email: bool,
    groups_claim: str,
) -> User:
    subject = claims["sub"]
    profile = profile_from_claims(claims)
    groups, problems = groups_from_claim(claims.get(groups_claim))
    for problem in problems:
        logger.warning("single sign-on of subject %s: %s", subject, problem)
    wanted = roles_from_groups(groups, mapping)
    comment = _comment(issuer)
    with transaction.atomic():
        identity = (
            SsoIdentity.objects.select_for_update()
            .select_related("user")
            .filter(issuer=issuer, subject=subject)
            .first()
        )
        if identity is not None:
            user = identity.user
        else:
            user = _linked_by_email(profile) if link_by_email else None
            linked = user is not None
            if user is None:
                user = User(
                    username=_free_username(claims),
                    email=profile.email,
                    first_name=profile.first_name,
                    last_name=profile.last_name,
                )
                user.set_unusable_password()
                user_save(user=user, acting_user=None, comment=comment)
            identity = SsoIdentity.objects.create(user=user, issuer=issuer, subject=subject)
            audit_record(
                acting_user=None,
                action="sso_identity.created",
                target=identity,
                after={
                    "user": user.get_username(),
                    "issuer": issuer,
                    "subject": subject,
                    "linked_by": "verified e-mail address" if linked else "new account",
                },
                comment=comment,
            )
        if not user.is_active:
            raise SsoRefused("inactive", f"user {user.get_username()} is inactive")
        _apply_profile_and_roles(user, profile, wanted, comment=comment)
        _apply_team_roles(user, wanted, mapping, comment)
        identity.last_login_at = timezone.now()
        identity.save(update_fields=["last_login_at"])
    return user


def sso_sign_in(
    *,
    claims: Mapping[str, Any],
    issuer: str,
    mapping: GroupMapping,
    link_by_email: bool = False,
    groups_claim: str = "groups",
) -> User:
    """The user these (verified) claims sign in, made or linked at the first sign-in, with
    profile and roles as the provider gives them; raises SsoRefused."""
    arguments = {
        "claims": claims,
        "issuer": issuer,
        "mapping": mapping,
        "link_by_email": link_by_email,
        "groups_claim": groups_claim,
    }
    try:
        return _sign_in_once(**arguments)
    except IntegrityError:
        # The same person's first sign-in in two tabs at once (or a user name taken
        # meanwhile): the second pass finds what the first made.
        return _sign_in_once(**arguments)
