"""One colour per meaning: every figure the portal's pages carry takes its colours from
common/palette.py (guarantee, cap, capacity, pending, borrowed, idle, other teams; each team its
own, the same on the dashboard, /clusters/ and /usage/), shows its legend even for one trace,
and a chart of one day has a date axis written as days."""

from datetime import date
from decimal import Decimal

import orjson
import pytest

from common import palette
from overview.charts import capacity_figure, chart_segments, team_usage_figure
from overview.selectors import Share, UsageSeries
from quotas.models import Team
from tests.support.charts import checked
from tests.support.visible_text import figures_of
from tests.support.worlds import add_usage
from usage.charts import AllocationStep, usage_figures
from usage.selectors import UsageDay

# The traces' names on the English pages, by meaning.
FIXED_BY_NAME = {
    "guarantee": palette.GUARANTEE,
    "cap": palette.CAP,
    "pending peak": palette.PENDING,
    "borrowed (above guarantee)": palette.BORROWED,
    "guaranteed but idle": palette.IDLE,
    "Other teams": palette.OTHER_TEAMS,
    "smaller teams": palette.SMALLER_TEAMS,
}
TEAM_TRACES = {"daily peak used", "daily mean used", "peak allocated", "mean allocated"}


def _colour(trace: dict) -> str | None:
    return (trace.get("line") or {}).get("color") or (trace.get("marker") or {}).get("color")


def _page_figures(client, user, path: str) -> list[dict]:
    client.force_login(user)
    response = client.get(path)
    assert response.status_code == 200
    figures = figures_of(response.content.decode())
    assert figures, f"{path} carries no chart"
    return figures


@pytest.fixture
def usage_world(plan, gpu):
    for ns in plan.values():
        add_usage(ns, gpu)
    return plan


def _team_colours() -> dict[str, str]:
    return palette.team_colours(Team.objects.values_list("slug", flat=True))


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["admin", "lead_a"])
def test_every_figure_takes_each_meaning_from_the_palette(client, usage_world, request, who):
    user = request.getfixturevalue(who)
    teams = _team_colours()
    # On a lead's /usage/ every chart is of a team the lead sees: only the lead's team.
    namespaces = {ns.name: ns.team.slug for ns in usage_world.values()}
    seen = set()
    for path in ("/", "/clusters/", "/usage/"):
        for figure in _page_figures(client, user, path):
            assert figure["layout"]["showlegend"] is True, (path, figure["layout"].get("title"))
            title = figure["layout"]["title"]["text"]
            for trace in figure["data"]:
                name, colour = trace["name"], _colour(trace)
                assert colour is not None, f"{path}: trace {name!r} has no colour of its own"
                if name in FIXED_BY_NAME:
                    assert colour == FIXED_BY_NAME[name], (path, name)
                elif name in TEAM_TRACES:
                    # The dashboard's charts are per team; /usage/'s per namespace.
                    owner = next((slug for ns, slug in namespaces.items() if ns in title), None)
                    if owner is not None:
                        assert colour == teams[owner], (path, title, name)
                    else:
                        assert colour in teams.values(), (path, title, name)
                else:  # a team's segment of a capacity bar
                    assert colour == teams[name], (path, name)
                seen.add(name)
            for shape in figure["layout"].get("shapes", []):
                assert shape["line"]["color"] == palette.CAPACITY
    assert {"guarantee", "cap", "pending peak", "guaranteed but idle"} <= seen


@pytest.mark.django_db
def test_a_team_has_the_same_colour_on_the_dashboard_usage_and_clusters(
    client, usage_world, lead_a, admin
):
    dashboard = _page_figures(client, lead_a, "/")
    usage = _page_figures(client, lead_a, "/usage/?team=team-a")
    clusters = _page_figures(client, admin, "/clusters/")
    on_dashboard = {_colour(t) for f in dashboard for t in f["data"] if t["name"] in TEAM_TRACES}
    on_usage = {_colour(t) for f in usage for t in f["data"] if t["name"] in TEAM_TRACES}
    bars = {_colour(t) for f in clusters for t in f["data"] if t["name"] == "team-a"}
    assert on_dashboard == on_usage == bars == {_team_colours()["team-a"]}
    others = {_colour(t) for f in clusters for t in f["data"] if t["name"] == "team-b"}
    assert others and others != bars
    # A lead sees the other teams together, in their own grey, never in a team's colour.
    lead_clusters = _page_figures(client, lead_a, "/clusters/")
    aggregate = {_colour(t) for f in lead_clusters for t in f["data"] if t["name"] == "Other teams"}
    assert aggregate == {palette.OTHER_TEAMS}
    assert {_colour(t) for f in lead_clusters for t in f["data"] if t["name"] == "team-a"} == bars


def test_team_colours_follow_the_slug_order_and_never_mean_something_fixed():
    colours = palette.team_colours(["team-c", "team-a", "team-b", "team-a"])
    assert list(colours) == ["team-a", "team-b", "team-c"]
    assert colours == palette.team_colours(["team-b", "team-c", "team-a"])
    assert len(set(colours.values())) == 3
    assert not set(palette.TEAM_COLOURS) & set(palette.FIXED.values())
    assert palette.team_colour(colours, None) == palette.OTHER_TEAMS


def test_a_chart_of_one_team_still_shows_its_legend():
    fig = checked(
        capacity_figure(
            title="T",
            unit="GPU",
            capacity=Decimal(16),
            segments=[Share("team-a", "team-a", Decimal(6), Decimal(10))],
            labels={"guarantees": "G", "caps": "C", "capacity": "cap"},
            colours={"team-a": palette.TEAM_COLOURS[0]},
        )
    )
    assert fig["layout"]["showlegend"] is True
    assert fig["data"][0]["marker"]["color"] == palette.TEAM_COLOURS[0]


def test_merged_small_teams_are_light_grey_and_other_teams_grey():
    shares = [Share(f"t{i:02}", f"t{i:02}", Decimal(i), Decimal(i)) for i in range(1, 20)]
    shares.append(Share("Other teams", None, Decimal(1), Decimal(2)))
    segments = chart_segments(shares, rest_label="smaller teams")
    fig = capacity_figure(
        title="T",
        unit="GPU",
        capacity=None,
        segments=segments,
        labels={"guarantees": "G", "caps": "C", "capacity": "cap"},
        colours=palette.team_colours(s.team_slug for s in shares if s.team_slug),
    )
    by_name = {t["name"]: t["marker"]["color"] for t in fig["data"]}
    assert by_name["smaller teams"] == palette.SMALLER_TEAMS
    assert by_name["Other teams"] == palette.OTHER_TEAMS
    named = [c for n, c in by_name.items() if n.startswith("t")]
    assert palette.SMALLER_TEAMS not in named and palette.OTHER_TEAMS not in named


def _one_day(day: date) -> UsageDay:
    return UsageDay(
        day=day,
        cluster="demo",
        team="team-a",
        namespace="team-a-training",
        workload_class="training",
        resource="nvidia.com/gpu",
        source="cluster",
        samples=288,
        peak=Decimal(5),
        p95=Decimal(5),
        mean=Decimal(4),
        utilization_mean=None,
        memory_used_mean_mib=None,
        gpu_hours=Decimal(96),
        borrowed_gpu_hours=Decimal(0),
        idle_guaranteed_gpu_hours=Decimal(2),
        guarantee=Decimal(6),
        pending_peak=Decimal(0),
        pending_wait_seconds=0,
        pending_wait_mean_seconds=None,
        evictions=0,
        team_namespace_id=1,
        resource_id=1,
    )


def test_a_chart_of_one_day_has_a_date_axis_of_days_around_it():
    day = date(2026, 12, 2)
    series = UsageSeries(
        team_id=1,
        cluster="demo",
        resource="nvidia.com/gpu",
        unit="GPU",
        days=[day],
        peak=[Decimal(5)],
        mean=[Decimal(4)],
        guarantee=[Decimal(6)],
        cap=[Decimal(10)],
    )
    labels = {"peak": "p", "mean": "m", "guarantee": "g", "cap": "c"}
    dashboard = checked(team_usage_figure(series, title="T", labels=labels))
    usage = [
        checked(f)
        for f in usage_figures(
            title="ns",
            unit="GPU",
            days=[_one_day(day)],
            steps=[AllocationStep(day, Decimal(6), Decimal(10))],
        )
    ]
    for fig in [dashboard, *usage]:
        axis = fig["layout"]["xaxis"]
        assert axis["type"] == "date"
        assert axis["tickformat"] == axis["hoverformat"] == "%Y-%m-%d"
        assert axis["range"] == ["2026-12-01", "2026-12-03"]
        assert axis["dtick"] == 86_400_000
        assert fig["layout"]["showlegend"] is True
    # Many days: plotly picks the range, still written as days.
    many = usage_figures(
        title="ns",
        unit="GPU",
        days=[_one_day(date(2026, 12, d)) for d in (1, 2, 3)],
        steps=[],
    )
    assert "range" not in many[0]["layout"]["xaxis"]
    assert many[0]["layout"]["xaxis"]["tickformat"] == "%Y-%m-%d"
    # Numbers, not Decimals: plotly writes such a figure at once, without a walk to convert it.
    assert all(orjson.dumps(f) for f in many)
