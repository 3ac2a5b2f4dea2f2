"""The overview pages' chart figures: plain functions from reads to plotly figure dictionaries,
read here as a checked plotly Figure writes them, and as the JSON the page carries."""

import json
from datetime import date
from decimal import Decimal

import orjson
import pytest

from common.charts import charts_json
from overview.charts import MAX_SEGMENTS, capacity_figure, chart_segments, team_usage_figure
from overview.selectors import Share, UsageSeries
from tests.support.charts import checked

LABELS = {"guarantees": "G", "caps": "C", "capacity": "cap line"}


def as_json(figure) -> dict:
    return checked(figure)


def share(name: str, g: int, c: int) -> Share:
    return Share(name, name, Decimal(g), Decimal(c))


def test_few_teams_keep_their_own_segments_and_others_stay_last():
    others = Share("Other teams", None, Decimal(5), Decimal(9))
    shares = [share("a", 1, 2), share("b", 3, 4), others]
    assert chart_segments(shares, rest_label="rest") == shares


def test_many_teams_keep_the_largest_and_merge_the_rest():
    shares = [share(f"t{i:02}", i, 2 * i) for i in range(1, 31)]
    segments = chart_segments(shares, rest_label="smaller teams")
    assert len(segments) == MAX_SEGMENTS
    kept = [s.label for s in segments[:-1]]
    assert kept == [f"t{i:02}" for i in range(20, 31)]  # the 11 largest caps, by name
    rest = segments[-1]
    assert (rest.label, rest.guarantee, rest.cap) == (
        "smaller teams",
        sum(range(1, 20)),
        2 * sum(range(1, 20)),
    )
    assert sum(s.cap for s in segments) == sum(s.cap for s in shares)


def test_capacity_figure_stacks_teams_under_a_capacity_line():
    fig = as_json(
        capacity_figure(
            title="T",
            unit="GPU",
            capacity=Decimal(16),
            segments=[share("a", 6, 10), share("b", 4, 6)],
            labels=LABELS,
        )
    )
    assert fig["layout"]["barmode"] == "stack"
    assert [(t["name"], t["x"], t["y"]) for t in fig["data"]] == [
        ("a", ["G", "C"], [6.0, 10.0]),
        ("b", ["G", "C"], [4.0, 6.0]),
    ]
    [line] = fig["layout"]["shapes"]
    assert (line["y0"], line["y1"], line["xref"]) == (16.0, 16.0, "paper")
    no_capacity = as_json(
        capacity_figure(title="T", unit="GPU", capacity=None, segments=[], labels=LABELS)
    )
    assert "shapes" not in no_capacity["layout"]


def test_team_usage_figure_draws_guarantee_and_cap_as_steps():
    series = UsageSeries(
        team_id=1,
        cluster="demo",
        resource="nvidia.com/gpu",
        unit="GPU",
        days=[date(2026, 1, 1), date(2026, 1, 2)],
        peak=[Decimal(7), Decimal("7.5")],
        mean=[Decimal(4), Decimal(5)],
        guarantee=[Decimal(6), None],
        cap=[Decimal(10), Decimal(12)],
    )
    labels = {"peak": "peak", "mean": "mean", "guarantee": "g", "cap": "c"}
    fig = as_json(team_usage_figure(series, title="T", labels=labels))
    by_name = {t["name"]: t for t in fig["data"]}
    assert by_name["peak"]["x"] == ["2026-01-01", "2026-01-02"]
    assert by_name["peak"]["y"] == [7.0, 7.5]
    assert by_name["g"]["y"] == [6.0, None] and by_name["g"]["line"]["shape"] == "hv"
    assert by_name["c"]["y"] == [10.0, 12.0]
    assert fig["layout"]["yaxis"]["title"]["text"] == "GPU"
    assert fig["layout"]["xaxis"]["dtick"] == 86_400_000  # one tick a day, not hours


def test_the_figures_hold_numbers_so_plotly_writes_them_without_a_walk():
    """A Decimal anywhere in a figure sends plotly's writer through the whole figure to
    convert it (3 ms of a dashboard read); the figures hold floats, as plotly would write."""
    series = UsageSeries(
        team_id=1,
        cluster="c",
        resource="r",
        unit="GPU",
        days=[date(2026, 1, 1)],
        peak=[Decimal("7.5")],
        mean=[Decimal(4)],
        guarantee=[None],
        cap=[Decimal(10)],
    )
    labels = {"peak": "p", "mean": "m", "guarantee": "g", "cap": "c"}
    usage = team_usage_figure(series, title="T", labels=labels)
    capacity = capacity_figure(
        title="T", unit="GPU", capacity=Decimal("16.5"), segments=[share("a", 6, 10)], labels=LABELS
    )
    for figure in (usage, capacity):
        assert json.loads(orjson.dumps(figure)) == checked(figure)
    assert usage["data"][0]["y"] == [7.5] and capacity["layout"]["shapes"][0]["y0"] == 16.5


def test_a_month_of_days_gets_a_tick_every_few_days():
    series = UsageSeries(
        team_id=1,
        cluster="c",
        resource="r",
        unit="GPU",
        days=[date(2026, 1, d) for d in range(1, 31)],
    )
    labels = {"peak": "p", "mean": "m", "guarantee": "g", "cap": "c"}
    axis = as_json(team_usage_figure(series, title="T", labels=labels))["layout"]["xaxis"]
    assert axis["dtick"] == 4 * 86_400_000 and axis["tickformat"] == "%Y-%m-%d"


def test_the_page_carries_the_figures_as_plotly_writes_them_and_nothing_closes_the_script():
    fig = capacity_figure(
        title="T",
        unit="GPU",
        capacity=None,
        segments=[share("</script><b>x", 1, 2)],
        labels=LABELS,
    )
    text = charts_json([{"id": "cluster-chart-1-0", "figure": fig}])
    assert "</script>" not in text and "<" not in text
    [chart] = json.loads(text)
    assert chart == {"id": "cluster-chart-1-0", "figure": checked(fig)}
    assert chart["figure"]["data"][0]["name"] == "</script><b>x"
    assert charts_json([]) == "[]"
    with pytest.raises(ValueError, match="not an element id"):
        charts_json([{"id": '"><x', "figure": fig}])


def test_a_figure_plotly_would_not_draw_is_refused_by_the_check_and_by_the_page():
    fig = capacity_figure(title="T", unit="GPU", capacity=None, segments=[], labels=LABELS)
    fig["layout"]["heigth"] = 300
    with pytest.raises(ValueError, match="heigth"):
        checked(fig)
    with pytest.raises(TypeError, match="not a plotly figure"):
        charts_json([{"id": "c", "figure": {"data": [{"x": [1]}], "layout": {}}}])
    with pytest.raises(TypeError, match="not a plotly figure"):
        charts_json([{"id": "c", "figure": [fig]}])
