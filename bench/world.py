"""The data the page benchmarks read: the overview pages' test world (tests/support/worlds.py:
teams on several clusters with allocations in two versions, usage samples and daily rollups,
requests with lines in every state and their audit history, temporary grants, suggestions,
syncs and drift) and the people who read it: a platform admin, an auditor, and a team lead
of a few teams, each with a logged-in session and an API token."""

from dataclasses import dataclass

LEAD_TEAMS = 3


@dataclass
class Person:
    username: str
    user_id: int
    session: str  # value of the session cookie
    token: str  # "gqp_..." API token


def _user(username: str, groups: tuple[str, ...] = ()):
    from django.contrib.auth.models import User

    from quotas.roles import ensure_role_groups

    user, created = User.objects.get_or_create(
        username=username, defaults={"email": f"{username}@example.com", "is_staff": bool(groups)}
    )
    if created:
        user.set_unusable_password()
        user.save()
        if groups:
            by_name = dict(zip(("platform-admins", "auditors"), ensure_role_groups(), strict=True))
            user.groups.add(*(by_name[g] for g in groups))
    return user


def grow(*, teams: int, clusters: int, requests_per_team: int) -> dict:
    """Grow the world to ``teams`` teams on ``clusters`` clusters, each team with
    ``requests_per_team`` more requests (callable again with bigger numbers); the lead leads
    the first LEAD_TEAMS teams."""
    from quotas.models import TeamMembership
    from tests.support.worlds import grow_world

    admin = _user("bench-admin", ("platform-admins",))
    _user("bench-auditor", ("auditors",))
    lead = _user("bench-lead")
    world = grow_world(
        teams=teams, clusters=clusters, requests_per_team=requests_per_team, admin=admin
    )
    for team in world["teams"][:LEAD_TEAMS]:
        TeamMembership.objects.get_or_create(
            team=team, user=lead, defaults={"role": TeamMembership.Role.LEAD}
        )
    return world


def counts() -> dict:
    """How big the world is, for the benchmark's details."""
    from approvals.models import QuotaRequest, RequestLine
    from quotas.models import AuditEvent, Cluster, Team, TeamNamespace
    from usage.models import UsageDaily

    return {
        "teams": Team.objects.count(),
        "clusters": Cluster.objects.count(),
        "namespaces": TeamNamespace.objects.count(),
        "requests": QuotaRequest.objects.count(),
        "request_lines": RequestLine.objects.count(),
        "audit_events": AuditEvent.objects.count(),
        "usage_daily_rows": UsageDaily.objects.count(),
    }


def people() -> dict[str, Person]:
    """A fresh session and API token for each of lead, admin and auditor."""
    from django.contrib.auth.models import User
    from django.test import Client

    from portal.tokens import api_token_create

    found = {}
    for role in ("lead", "admin", "auditor"):
        user = User.objects.get(username=f"bench-{role}")
        client = Client()
        client.force_login(user)
        _row, token = api_token_create(user=user, name=f"bench {role}")
        found[role] = Person(user.username, user.pk, client.cookies["sessionid"].value, token)
    return found
