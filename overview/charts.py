"""Chart figures of the overview pages: plain functions from the overview reads to plotly
figures, written as plotly's figure dictionaries (``{"data": [traces], "layout": {...}}``, each
trace with its ``type``). The page carries each figure's JSON as plotly writes it
(``common.charts.charts_json``) and ``static/portal/usage_charts.js`` hands it to the plotly.js
the portal serves itself. Labels come in already translated.

Dictionaries rather than graph objects: building a ``plotly.graph_objects.Figure`` checks every
property and point as it is set, which cost more than the rest of a dashboard's charts. The
tests build each figure as a checked ``Figure`` (tests/overview/test_charts.py), so a property
plotly does not know still fails there."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from common import palette
from common.charts import BASE_LAYOUT, Figure, day_axis, number, numbers
from overview.selectors import Share, UsageSeries

# A stacked bar of hundreds of teams is unreadable: the largest keep their own segment, the
# rest are drawn as one.
MAX_SEGMENTS = 12
# The merged segment's key (no team's slug: slugs have no spaces).
SMALLER_TEAMS = "smaller teams"

# The overview's charts fill their card, with the legend below the plot (shown even for one
# trace: its colour means something).
_LAYOUT = {
    **BASE_LAYOUT,
    "autosize": True,
    "showlegend": True,
    "legend": {"orientation": "h", "y": -0.2},
}

DAY_MS = 86_400_000
MAX_DAY_TICKS = 8


def _days_axis(days: Sequence) -> dict:
    """Ticks on whole days (never hours of a day the rollups do not split), at most
    MAX_DAY_TICKS of them."""
    step = max(1, -(-len(days) // MAX_DAY_TICKS))
    return {**day_axis(days), "dtick": step * DAY_MS}


def team_usage_figure(
    series: UsageSeries, *, title: str, labels: dict[str, str], colour: str = palette.USED
) -> Figure:
    """Daily peak and mean used (in the team's ``colour``) against the guarantee and cap in
    force (steps)."""
    x = series.days
    return {
        "data": [
            {
                "type": "scatter",
                "x": x,
                "y": numbers(series.peak),
                "mode": "lines+markers",
                "name": labels["peak"],
                "line": {"color": colour},
                "marker": {"color": colour},
            },
            {
                "type": "scatter",
                "x": x,
                "y": numbers(series.mean),
                "mode": "lines",
                "name": labels["mean"],
                "line": {"color": colour, "dash": "dot"},
            },
            {
                "type": "scatter",
                "x": x,
                "y": numbers(series.guarantee),
                "mode": "lines",
                "name": labels["guarantee"],
                "line": {"shape": "hv", "color": palette.GUARANTEE},
            },
            {
                "type": "scatter",
                "x": x,
                "y": numbers(series.cap),
                "mode": "lines",
                "name": labels["cap"],
                "line": {"shape": "hv", "dash": "dash", "color": palette.CAP},
            },
        ],
        "layout": {
            **_LAYOUT,
            "title": {"text": title},
            "xaxis": _days_axis(series.days),
            "yaxis": {"title": {"text": series.unit}, "rangemode": "tozero"},
            "height": 320,
        },
    }


def chart_segments(shares: Sequence[Share], *, rest_label: str) -> list[Share]:
    """The shares to draw: the ``MAX_SEGMENTS - 1`` largest (by cap, then guarantee) and the
    rest together, when there are more than ``MAX_SEGMENTS``; an aggregate of other teams
    stays last and is never merged with named teams."""
    named = [s for s in shares if not s.is_others]
    others = [s for s in shares if s.is_others]
    if len(named) + len(others) <= MAX_SEGMENTS:
        return [*named, *others]
    keep = MAX_SEGMENTS - 1 - len(others)
    ranked = sorted(named, key=lambda s: (-s.cap, -s.guarantee, s.label))
    rest = ranked[keep:]
    merged = Share(
        rest_label,
        SMALLER_TEAMS,
        sum((s.guarantee for s in rest), Decimal(0)),
        sum((s.cap for s in rest), Decimal(0)),
    )
    return [*sorted(ranked[:keep], key=lambda s: s.label), merged, *others]


def _segment_colour(share: Share, colours: dict[str, str]) -> str:
    if share.is_others:
        return palette.OTHER_TEAMS
    if share.team_slug == SMALLER_TEAMS:
        return palette.SMALLER_TEAMS
    return palette.team_colour(colours, share.team_slug)


def capacity_figure(
    *,
    title: str,
    unit: str,
    capacity: Decimal | None,
    segments: Sequence[Share],
    labels: dict[str, str],
    colours: dict[str, str] | None = None,
) -> Figure:
    """Two stacked bars, the sum of guarantees and the sum of caps, one segment per team (in
    its colour of ``colours``, slug to colour), with the capacity as a line across: a
    guarantee bar above it is over-commitment."""
    x = [labels["guarantees"], labels["caps"]]
    layout = {
        **_LAYOUT,
        "title": {"text": title},
        "barmode": "stack",
        "yaxis": {"title": {"text": unit}, "rangemode": "tozero"},
        "height": 340,
    }
    if capacity is not None:
        # A line across the whole plot, whatever the bars' width, named at its right end.
        layout["shapes"] = [
            {
                "type": "line",
                "xref": "paper",
                "x0": 0,
                "x1": 1,
                "yref": "y",
                "y0": number(capacity),
                "y1": number(capacity),
                "line": {"color": palette.CAPACITY, "dash": "dash", "width": 2},
            }
        ]
        layout["annotations"] = [
            {
                "xref": "paper",
                "x": 1,
                "xanchor": "right",
                "yref": "y",
                "y": number(capacity),
                "yanchor": "bottom",
                "text": labels["capacity"],
                "showarrow": False,
            }
        ]
    return {
        "data": [
            {
                "type": "bar",
                "x": x,
                "y": numbers((s.guarantee, s.cap)),
                "name": s.label,
                "marker": {"color": _segment_colour(s, colours or {})},
            }
            for s in segments
        ],
        "layout": layout,
    }
