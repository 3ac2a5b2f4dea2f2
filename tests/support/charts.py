"""A chart figure as plotly checks it: the portal builds figure dictionaries without plotly's
checks (common/charts.py); the tests read each through a checked graph object, so a property,
trace type or value plotly does not accept fails here."""

import json

import plotly.graph_objects as go


def checked(figure: dict) -> dict:
    """The figure as a checked ``plotly.graph_objects.Figure`` writes it (raises ValueError on
    anything plotly does not accept), without the template a graph object adds by default (the
    portal's figures have none: plotly.js' own look)."""
    fig = go.Figure(figure)
    fig.layout.template = None
    return json.loads(fig.to_json())
