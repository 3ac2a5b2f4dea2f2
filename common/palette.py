"""One colour per meaning in every chart of the portal: fixed colours for what a chart shows of
an allocation (guarantee, cap, capacity, borrowed, pending, idle, the other teams together), and
one colour per team, the same in every chart, given by the team's place in the slug order of
all teams (``team_colours``). Figures take their colours from here and nowhere else."""

from __future__ import annotations

from collections.abc import Iterable

GUARANTEE = "#1d4ed8"  # blue
CAP = "#b42318"  # red
CAPACITY = "#111827"  # near black: the cluster's capacity line
USED = "#0f766e"  # teal: usage of no one team in particular
BORROWED = "#d97706"  # amber: above the guarantee
PENDING = "#db2777"  # pink: pods waiting
IDLE = "#7c3aed"  # violet: guaranteed but idle
OTHER_TEAMS = "#6b7280"  # grey: every team the reader may not see, together
SMALLER_TEAMS = "#b6bcc6"  # light grey: the named teams too small for a segment of their own

FIXED = {
    "guarantee": GUARANTEE,
    "cap": CAP,
    "capacity": CAPACITY,
    "used": USED,
    "borrowed": BORROWED,
    "pending": PENDING,
    "idle": IDLE,
    "other teams": OTHER_TEAMS,
    "smaller teams": SMALLER_TEAMS,
}

# Teams' colours, none of them one of the fixed ones; after the last, the first again.
TEAM_COLOURS = (
    "#ea580c",  # orange
    "#0891b2",  # cyan
    "#65a30d",  # lime
    "#9333ea",  # purple
    "#ca8a04",  # ochre
    "#4f46e5",  # indigo
    "#be185d",  # raspberry
    "#15803d",  # green
    "#0369a1",  # sea blue
    "#a16207",  # brown
)

assert not set(TEAM_COLOURS) & set(FIXED.values()), "a team colour means something else"


def team_colours(slugs: Iterable[str]) -> dict[str, str]:
    """Each team's colour from its place among ``slugs`` (every team's slug) in slug order:
    the same team gets the same colour on every page, whoever reads it."""
    ordered = sorted(set(slugs))
    return {slug: TEAM_COLOURS[i % len(TEAM_COLOURS)] for i, slug in enumerate(ordered)}


def team_colour(colours: dict[str, str], slug: str | None) -> str:
    """The team's colour (the other teams' grey for the aggregate, or a team not known)."""
    if slug is None:
        return OTHER_TEAMS
    return colours.get(slug, USED)
