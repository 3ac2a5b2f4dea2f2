"""What the portal's charts share: figures built on the server as plotly figure dictionaries
(``overview/charts.py``, ``usage/charts.py``), and the one JSON element a page carries them in,
written by plotly (``plotly.io.to_json``, with its orjson engine) and handed by
``static/portal/usage_charts.js`` to ``Plotly.newPlot``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import plotly.io as pio
from django.utils.safestring import SafeString, mark_safe

# plotly.js' own look: written without a template (plotly.py's default one would grey the plot
# area, change the colours and add some 8 kB to every figure).
BASE_LAYOUT = {"margin": {"t": 40, "b": 40, "l": 50, "r": 10}}

# A plotly figure as a dictionary: {"data": [trace, ...], "layout": {...}}, each trace a
# dictionary with its "type".
Figure = dict[str, Any]


def day_axis(days: Sequence[date]) -> dict:
    """An x axis of days: a date axis written as days (ticks and hover, never "23:59:59.9995"
    or a month's English name), and a single day padded to the day before and after, so one
    point is drawn in the middle of a readable range."""
    axis = {"type": "date", "tickformat": "%Y-%m-%d", "hoverformat": "%Y-%m-%d"}
    if len(set(days)) == 1:
        day = days[0]
        axis["range"] = [
            (day - timedelta(days=1)).isoformat(),
            (day + timedelta(days=1)).isoformat(),
        ]
        axis["dtick"] = 86_400_000
    return axis


def number(value: Decimal | float | None) -> float | None:
    """An amount as a figure's number: a Decimal as the float plotly writes it; None (a gap)
    stays None."""
    return float(value) if isinstance(value, Decimal) else value


def numbers(values: Iterable[Decimal | float | None]) -> list[float | None]:
    """Amounts as a figure's numbers (:func:`number`). A figure of JSON's own types is written
    by plotly's orjson engine at once; one Decimal anywhere makes plotly walk the whole figure
    to convert it, which took 3 ms of a dashboard read."""
    return [float(v) if isinstance(v, Decimal) else v for v in values]


_ELEMENT_ID = re.compile(r"[A-Za-z][\w-]*\Z")


def charts_json(charts: Iterable[dict]) -> SafeString:
    """``[{"id": <element id>, "figure": <Figure>}, ...]`` as one JSON array, each figure as
    plotly writes it (``plotly.io.to_json``: amounts and days as numbers and ISO dates, with
    ``<``, ``>`` and ``/`` escaped, so that nothing in a title or a team's name can close the
    script element it is put in). The figures are not checked here (the tests check each as a
    ``plotly.graph_objects.Figure``): only that each is a figure's shape."""
    items = []
    for chart in charts:
        element_id, figure = chart["id"], chart["figure"]
        if not _ELEMENT_ID.match(element_id):
            raise ValueError(f"not an element id: {element_id!r}")
        if not (
            isinstance(figure, dict)
            and isinstance(figure.get("data"), list)
            and isinstance(figure.get("layout"), dict)
            and all(isinstance(trace, dict) and "type" in trace for trace in figure["data"])
        ):
            raise TypeError(f"{element_id}: not a plotly figure dictionary: {figure!r:.80}")
        written = pio.to_json(figure, validate=False, engine="orjson")
        items.append(f'{{"id":{json.dumps(element_id)},"figure":{written}}}')
    return mark_safe("[" + ",".join(items) + "]")  # noqa: S308 - escaped by plotly, see above
