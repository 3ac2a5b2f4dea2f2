"""What the provider's groups make someone in the portal: platform admin, auditor, and lead or
member of teams. Pure: the groups and the mapping in, the wanted roles out."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

SLUG = "{slug}"
# A team slug as quotas.models.Team allows it (a DNS-1123 label).
_SLUG_PATTERN = r"(?P<slug>[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)"
LEAD = "lead"
MEMBER = "member"


def team_pattern_problem(pattern: str) -> str | None:
    """Why a team group pattern is unusable (None: it is usable, or empty for none)."""
    if pattern and pattern.count(SLUG) != 1:
        return f"{pattern!r} must hold {SLUG} exactly once"
    return None


def _compiled(pattern: str) -> re.Pattern[str] | None:
    if not pattern or team_pattern_problem(pattern):
        return None
    before, after = pattern.split(SLUG)
    return re.compile(re.escape(before) + _SLUG_PATTERN + re.escape(after))


@dataclass(frozen=True)
class GroupMapping:
    """The groups that make platform admins and auditors, and the patterns of the groups that
    make team leads and members. A role whose groups are unset is not the provider's to give
    or take (the portal's admins keep setting it)."""

    admin_groups: frozenset[str] = frozenset()
    auditor_groups: frozenset[str] = frozenset()
    team_lead_pattern: str = ""
    team_member_pattern: str = ""

    @classmethod
    def from_settings(cls, settings: Any) -> GroupMapping:
        return cls(
            admin_groups=frozenset(g for g in settings.OIDC_ADMIN_GROUPS if g),
            auditor_groups=frozenset(g for g in settings.OIDC_AUDITOR_GROUPS if g),
            team_lead_pattern=settings.OIDC_TEAM_LEAD_GROUP,
            team_member_pattern=settings.OIDC_TEAM_MEMBER_GROUP,
        )

    @property
    def manages_teams(self) -> bool:
        return bool(self.team_lead_pattern or self.team_member_pattern)


@dataclass(frozen=True)
class WantedRoles:
    """None where the provider does not decide the role."""

    admin: bool | None
    auditor: bool | None
    # team slug -> LEAD or MEMBER (slugs the portal may not have: the caller checks)
    teams: Mapping[str, str] | None


def roles_from_groups(groups: Iterable[str], mapping: GroupMapping) -> WantedRoles:
    """The roles the groups give; lead wins over member for the same team."""
    names = set(groups)
    teams: dict[str, str] | None = None
    if mapping.manages_teams:
        teams = {}
        lead, member = _compiled(mapping.team_lead_pattern), _compiled(mapping.team_member_pattern)
        for name in sorted(names):
            if lead and (found := lead.fullmatch(name)):
                teams[found["slug"]] = LEAD
            elif member and (found := member.fullmatch(name)):
                teams.setdefault(found["slug"], MEMBER)
    return WantedRoles(
        admin=bool(names & mapping.admin_groups) if mapping.admin_groups else None,
        auditor=bool(names & mapping.auditor_groups) if mapping.auditor_groups else None,
        teams=teams,
    )
