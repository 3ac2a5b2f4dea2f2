"""Chart figures of the overview pages, as plotly figure JSON (data + layout): plain functions
from the overview reads to dicts, drawn by ``static/portal/usage_charts.js`` with the plotly.js
the portal serves itself. Labels come in already translated."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from overview.selectors import Share, UsageSeries

# A stacked bar of hundreds of teams is unreadable: the largest keep their own segment, the
# rest are drawn as one.
MAX_SEGMENTS = 12

_LAYOUT = {
    "autosize": True,
    "margin": {"t": 40, "b": 40, "l": 50, "r": 10},
    "legend": {"orientation": "h", "y": -0.2},
}


def _f(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


def team_usage_figure(series: UsageSeries, *, title: str, labels: dict[str, str]) -> dict:
    """Daily peak and mean used against the guarantee and cap in force (steps)."""
    x = [d.isoformat() for d in series.days]
    line = {"type": "scatter", "x": x}
    return {
        "data": [
            {**line, "mode": "lines+markers", "name": labels["peak"], "y": _fs(series.peak)},
            {**line, "mode": "lines", "name": labels["mean"], "y": _fs(series.mean)},
            {
                **line,
                "mode": "lines",
                "name": labels["guarantee"],
                "y": _fs(series.guarantee),
                "line": {"shape": "hv"},
            },
            {
                **line,
                "mode": "lines",
                "name": labels["cap"],
                "y": _fs(series.cap),
                "line": {"shape": "hv", "dash": "dash"},
            },
        ],
        "layout": {
            **_LAYOUT,
            "title": {"text": title},
            "xaxis": _days_axis(len(series.days)),
            "yaxis": {"title": {"text": series.unit}, "rangemode": "tozero"},
            "height": 320,
        },
    }


DAY_MS = 86_400_000
MAX_DAY_TICKS = 8


def _days_axis(days: int) -> dict:
    """Ticks on whole days (never hours of a day the rollups do not split), at most
    MAX_DAY_TICKS of them."""
    step = max(1, -(-days // MAX_DAY_TICKS))
    return {"type": "date", "tickformat": "%Y-%m-%d", "dtick": step * DAY_MS}


def _fs(values: Sequence[Decimal | None]) -> list[float | None]:
    return [_f(v) for v in values]


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
        None,
        sum((s.guarantee for s in rest), Decimal(0)),
        sum((s.cap for s in rest), Decimal(0)),
    )
    return [*sorted(ranked[:keep], key=lambda s: s.label), merged, *others]


def capacity_figure(
    *,
    title: str,
    unit: str,
    capacity: Decimal | None,
    segments: Sequence[Share],
    labels: dict[str, str],
) -> dict:
    """Two stacked bars, the sum of guarantees and the sum of caps, one segment per team,
    with the capacity as a line across: a guarantee bar above it is over-commitment."""
    x = [labels["guarantees"], labels["caps"]]
    data = [
        {
            "type": "bar",
            "name": s.label,
            "x": x,
            "y": [_f(s.guarantee), _f(s.cap)],
        }
        for s in segments
    ]
    layout = {
        **_LAYOUT,
        "title": {"text": title},
        "barmode": "stack",
        "yaxis": {"title": {"text": unit}, "rangemode": "tozero"},
        "height": 340,
    }
    if capacity is not None:
        # A line across the whole plot, whatever the bars' width.
        layout["shapes"] = [
            {
                "type": "line",
                "xref": "paper",
                "x0": 0,
                "x1": 1,
                "yref": "y",
                "y0": _f(capacity),
                "y1": _f(capacity),
                "line": {"color": "#b42318", "dash": "dash", "width": 2},
            }
        ]
        layout["annotations"] = [
            {
                "xref": "paper",
                "x": 1,
                "xanchor": "right",
                "yref": "y",
                "y": _f(capacity),
                "yanchor": "bottom",
                "text": labels["capacity"],
                "showarrow": False,
            }
        ]
    return {"data": data, "layout": layout}
