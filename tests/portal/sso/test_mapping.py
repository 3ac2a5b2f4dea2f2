"""Which roles the provider's groups give: pure functions, no database."""

from types import SimpleNamespace

from portal.sso.mapping import LEAD, MEMBER, GroupMapping, roles_from_groups, team_pattern_problem

FULL = GroupMapping(
    admin_groups=frozenset({"portal-admins"}),
    auditor_groups=frozenset({"auditors", "finance"}),
    team_lead_pattern="team:{slug}:lead",
    team_member_pattern="team:{slug}:member",
)


def test_groups_give_roles():
    wanted = roles_from_groups(
        ["portal-admins", "finance", "team:team-a:lead", "team:team-b:member"], FULL
    )
    assert wanted.admin is True and wanted.auditor is True
    assert wanted.teams == {"team-a": LEAD, "team-b": MEMBER}


def test_no_group_takes_a_configured_role():
    wanted = roles_from_groups([], FULL)
    assert (wanted.admin, wanted.auditor, wanted.teams) == (False, False, {})


def test_unconfigured_roles_are_not_the_providers():
    wanted = roles_from_groups(["portal-admins", "team:team-a:lead"], GroupMapping())
    assert (wanted.admin, wanted.auditor, wanted.teams) == (None, None, None)


def test_lead_wins_over_member_in_any_order():
    for groups in (
        ["team:team-a:member", "team:team-a:lead"],
        ["team:team-a:lead", "team:team-a:member"],
    ):
        assert roles_from_groups(groups, FULL).teams == {"team-a": LEAD}


def test_names_that_are_not_team_slugs_are_left_out():
    groups = ["team:Team-A:lead", "team:-a:lead", "team:a_b:lead", "team::lead", "xteam:a:lead"]
    assert roles_from_groups(groups, FULL).teams == {}


def test_pattern_specials_are_literal():
    mapping = GroupMapping(team_lead_pattern="cn=.{slug}.+lead")
    assert roles_from_groups(["cn=.gpu.+lead"], mapping).teams == {"gpu": LEAD}
    assert roles_from_groups(["cn=xgpuxxlead"], mapping).teams == {}


def test_pattern_problems():
    assert team_pattern_problem("") is None
    assert team_pattern_problem("team:{slug}") is None
    assert "exactly once" in team_pattern_problem("team")
    assert "exactly once" in team_pattern_problem("{slug}:{slug}")


def test_from_settings_drops_empty_names():
    settings = SimpleNamespace(
        OIDC_ADMIN_GROUPS=["", "a"],
        OIDC_AUDITOR_GROUPS=[],
        OIDC_TEAM_LEAD_GROUP="",
        OIDC_TEAM_MEMBER_GROUP="t:{slug}",
    )
    mapping = GroupMapping.from_settings(settings)
    assert mapping.admin_groups == {"a"} and mapping.auditor_groups == frozenset()
    assert mapping.manages_teams
