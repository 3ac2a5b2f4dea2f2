"""Chart figures of the usage pages, as plotly figure JSON (data + layout): plain functions
from the daily rollups and the allocation history to dicts; ``static/portal/usage_charts.js``
draws them with the plotly.js the portal serves itself."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

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


def _f(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


def usage_figures(
    *, title: str, unit: str, days: Sequence[UsageDay], steps: Sequence[AllocationStep]
) -> list[dict]:
    """Two figures of one namespace and resource: daily peak and mean allocated against the
    guarantee and cap in force; and per day the GPU-hours borrowed and the guaranteed ones idle."""
    x = [d.day.isoformat() for d in days]
    forced = [in_force(steps, d.day) for d in days]
    usage = {
        "data": [
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "peak allocated",
                "x": x,
                "y": [_f(d.peak) for d in days],
            },
            {
                "type": "scatter",
                "mode": "lines",
                "name": "mean allocated",
                "x": x,
                "y": [_f(d.mean) for d in days],
            },
            {
                "type": "scatter",
                "mode": "lines",
                "name": "pending peak",
                "x": x,
                "y": [_f(d.pending_peak) for d in days],
                "line": {"dash": "dot"},
            },
            {
                "type": "scatter",
                "mode": "lines",
                "name": "guarantee",
                "x": x,
                "y": [_f(s.guarantee) if s else None for s in forced],
                "line": {"shape": "hv"},
            },
            {
                "type": "scatter",
                "mode": "lines",
                "name": "cap",
                "x": x,
                "y": [_f(s.cap) if s else None for s in forced],
                "line": {"shape": "hv", "dash": "dash"},
            },
        ],
        "layout": {
            "title": {"text": f"{title}: usage against guarantee and cap"},
            "yaxis": {"title": {"text": unit}, "rangemode": "tozero"},
            "height": 320,
            "margin": {"t": 40, "b": 40, "l": 50, "r": 10},
        },
    }
    hours = {
        "data": [
            {
                "type": "bar",
                "name": "borrowed (above guarantee)",
                "x": x,
                "y": [_f(d.borrowed_gpu_hours) for d in days],
            },
            {
                "type": "bar",
                "name": "guaranteed but idle",
                "x": x,
                "y": [_f(d.idle_guaranteed_gpu_hours) for d in days],
            },
        ],
        "layout": {
            "title": {"text": f"{title}: borrowed and idle {unit}-hours"},
            "barmode": "group",
            "yaxis": {"title": {"text": f"{unit}-hours"}, "rangemode": "tozero"},
            "height": 280,
            "margin": {"t": 40, "b": 40, "l": 50, "r": 10},
        },
    }
    return [usage, hours]
