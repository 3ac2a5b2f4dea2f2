"""Chart figures of the usage pages: plain functions from the daily rollups and the allocation
history to plotly figure dictionaries (as overview/charts.py writes them, and checked as graph
objects by the tests); the page carries their JSON (``common.charts.charts_json``) and
``static/portal/usage_charts.js`` draws them with the plotly.js the portal serves itself."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

from django.utils.translation import gettext as _

from common import palette
from common.charts import BASE_LAYOUT, Figure, day_axis, numbers
from common.palette import team_colour
from usage.selectors import UsageDay


@dataclass(frozen=True)
class AllocationStep:
    """An allocation's values from ``since`` on (one kept version)."""

    since: date
    guarantee: Decimal
    cap: Decimal


def in_force(steps: Sequence[AllocationStep], day: date) -> AllocationStep | None:
    """The step in force on ``day``: the last one since on or before it; before the first, the
    first (history older than the portal's own is measured against its first values)."""
    if not steps:
        return None
    i = bisect_right([s.since for s in steps], day)
    return steps[max(i - 1, 0)]


def usage_figures(
    *,
    title: str,
    unit: str,
    days: Sequence[UsageDay],
    steps: Sequence[AllocationStep],
    colour: str = palette.USED,
) -> list[Figure]:
    """Two figures of one namespace and resource: daily peak and mean allocated (in the team's
    ``colour``) against the guarantee and cap in force; and per day the GPU-hours borrowed and
    the guaranteed ones idle. Labels in the active language."""
    x = [d.day for d in days]
    forced = [in_force(steps, day) for day in x]
    layout = {
        **BASE_LAYOUT,
        "showlegend": True,
        "xaxis": day_axis(x),
        "yaxis": {"title": {"text": unit}, "rangemode": "tozero"},
    }

    def line(name: str, y: list, **style) -> dict:
        return {"type": "scatter", "x": x, "y": numbers(y), "name": name, **style}

    usage = {
        "data": [
            line(
                _("peak allocated"),
                [d.peak for d in days],
                mode="lines+markers",
                line={"color": colour},
                marker={"color": colour},
            ),
            line(
                _("mean allocated"),
                [d.mean for d in days],
                mode="lines",
                line={"color": colour, "dash": "dot"},
            ),
            line(
                _("pending peak"),
                [d.pending_peak for d in days],
                mode="lines",
                line={"dash": "dot", "color": palette.PENDING},
            ),
            line(
                _("guarantee"),
                [s.guarantee if s else None for s in forced],
                mode="lines",
                line={"shape": "hv", "color": palette.GUARANTEE},
            ),
            line(
                _("cap"),
                [s.cap if s else None for s in forced],
                mode="lines",
                line={"shape": "hv", "dash": "dash", "color": palette.CAP},
            ),
        ],
        "layout": {
            **layout,
            "title": {"text": _("%(title)s: usage against guarantee and cap") % {"title": title}},
            "height": 320,
        },
    }
    hours = {
        "data": [
            {
                "type": "bar",
                "x": x,
                "y": numbers(d.borrowed_gpu_hours for d in days),
                "name": _("borrowed (above guarantee)"),
                "marker": {"color": palette.BORROWED},
            },
            {
                "type": "bar",
                "x": x,
                "y": numbers(d.idle_guaranteed_gpu_hours for d in days),
                "name": _("guaranteed but idle"),
                "marker": {"color": palette.IDLE},
            },
        ],
        "layout": {
            **layout,
            "title": {
                "text": _("%(title)s: borrowed and idle %(unit)s-hours")
                % {"title": title, "unit": unit}
            },
            "barmode": "group",
            "yaxis": {
                "title": {"text": _("%(unit)s-hours") % {"unit": unit}},
                "rangemode": "tozero",
            },
            "height": 280,
        },
    }
    return [usage, hours]


def showback_figures(*, months: Sequence[date], rows: Sequence, colours: dict[str, str]) -> list:
    """Two figures of the showback (usage.showback rows): per month the GPU-hours each team
    shown used, stacked (the other teams together in grey); and per month, over the rows
    shown, the guarantee's hours against those used, borrowed and left idle."""
    x = [m.isoformat() for m in months]
    axis = {"type": "date", "tickformat": "%Y-%m", "hoverformat": "%Y-%m", "dtick": "M1"}
    if len(x) == 1:
        axis["range"] = [
            (months[0] - timedelta(days=20)).isoformat(),
            (months[0] + timedelta(days=20)).isoformat(),
        ]
    layout = {**BASE_LAYOUT, "showlegend": True, "xaxis": axis}
    hours_axis = {"title": {"text": _("GPU-hours")}, "rangemode": "tozero"}
    by_label: dict[str | None, dict[date, Decimal]] = {}
    totals = {
        key: dict.fromkeys(months, Decimal(0)) for key in ("guaranteed", "used", "borrowed", "idle")
    }
    for row in rows:
        if row.scope == "total":
            continue
        by_label.setdefault(row.team, dict.fromkeys(months, Decimal(0)))[row.month] = row.used
        for key in totals:
            totals[key][row.month] += getattr(row, key)
    stacked = [
        {
            "type": "bar",
            "x": x,
            "y": numbers(by_label[label][m] for m in months),
            "name": label if label else _("other teams"),
            "marker": {"color": team_colour(colours, label)},
        }
        for label in sorted(by_label, key=lambda t: (t is None, t or ""))
    ]
    names = {
        "guaranteed": (_("guaranteed"), palette.GUARANTEE),
        "used": (_("used"), palette.USED),
        "borrowed": (_("borrowed (above guarantee)"), palette.BORROWED),
        "idle": (_("guaranteed but idle"), palette.IDLE),
    }
    grouped = [
        {
            "type": "bar",
            "x": x,
            "y": numbers(totals[key][m] for m in months),
            "name": name,
            "marker": {"color": colour},
        }
        for key, (name, colour) in names.items()
    ]
    return [
        {
            "data": stacked,
            "layout": {
                **layout,
                "title": {"text": _("GPU-hours used per month, by team")},
                "barmode": "stack",
                "yaxis": hours_axis,
                "height": 320,
            },
        },
        {
            "data": grouped,
            "layout": {
                **layout,
                "title": {"text": _("Guaranteed, used, borrowed and idle GPU-hours per month")},
                "barmode": "group",
                "yaxis": hours_axis,
                "height": 320,
            },
        },
    ]
