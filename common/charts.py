"""What the portal's charts share: figures built on the server with plotly's graph objects
(``overview/charts.py``, ``usage/charts.py``), and the one JSON element a page
carries them in, which ``static/portal/usage_charts.js`` hands to ``Plotly.newPlot``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

import plotly.graph_objects as go
from django.utils.safestring import SafeString, mark_safe

# plotly.js' own look: plotly.py's default template would grey the plot area, change the
# colours and add some 8 kB to every figure.
BASE_LAYOUT = {"template": "none", "margin": {"t": 40, "b": 40, "l": 50, "r": 10}}

_ELEMENT_ID = re.compile(r"[A-Za-z][\w-]*\Z")


def charts_json(charts: Iterable[dict]) -> SafeString:
    """``[{"id": <element id>, "figure": <plotly.graph_objects.Figure>}, ...]`` as one JSON array,
    each figure as plotly writes it (``Figure.to_json()``: amounts and days as numbers and ISO
    dates, with ``<``, ``>`` and ``/`` escaped, so that nothing in a title or a team's name can
    close the script element it is put in)."""
    items = []
    for chart in charts:
        element_id, figure = chart["id"], chart["figure"]
        if not _ELEMENT_ID.match(element_id):
            raise ValueError(f"not an element id: {element_id!r}")
        if not isinstance(figure, go.Figure):
            raise TypeError(f"{element_id}: a plotly Figure, not {type(figure).__name__}")
        items.append(f'{{"id":{json.dumps(element_id)},"figure":{figure.to_json()}}}')
    return mark_safe("[" + ",".join(items) + "]")  # noqa: S308 - escaped by plotly, see above
