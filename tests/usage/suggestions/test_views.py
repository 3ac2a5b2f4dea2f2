"""The suggestions and usage pages, the chart figures, and plotly.js served from the pinned
package (never a CDN)."""

import json
import re
from datetime import date
from decimal import Decimal

import pytest
from django.contrib.staticfiles import finders

from tests.support.charts import checked
from usage.charts import AllocationStep, in_force, usage_figures

pytestmark = pytest.mark.django_db


def test_the_suggestions_page_lists_the_teams_of_the_user(client, june_suggestions, lead_a):
    client.force_login(lead_a)
    html = client.get("/suggestions/").content.decode()
    assert "team-a-training" in html and "team-b-inference" not in html
    assert "guarantee mostly idle" in html and "typical daily peak (p95 of daily peaks)" in html
    assert "idle_guarantee" not in html  # the flag in words, not its code
    assert 'href="/suggestions/"' in html  # in the navigation


def test_the_suggestions_page_filters_and_names_a_bad_filter(client, june_suggestions, admin):
    client.force_login(admin)
    html = client.get("/suggestions/?team=team-b&month=2025-06").content.decode()
    assert "team-b-inference" in html and "team-a-training" not in html
    response = client.get("/suggestions/?month=2025-13")
    assert response.status_code == 400
    assert "month: give a month as YYYY-MM, got &#x27;2025-13&#x27;" in response.content.decode()


def test_the_usage_page_has_the_canary_metrics_and_the_charts(client, june_usage, lead_a):
    client.force_login(lead_a)
    response = client.get("/usage/?cluster=demo&start=2025-06-01&end=2025-06-30")
    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-testid="canary-team-a"' in html and "team-b" not in html
    assert '<script src="/static/vendor/plotly.min.js">' in html
    assert '<script src="/static/portal/usage_charts.js">' in html
    assert "cdn" not in html.lower()
    data = json.loads(re.search(r'id="usage-chart-data"[^>]*>(.*?)</script>', html, re.S)[1])
    assert [c["id"] for c in data] == ["chart-0-0", "chart-0-1"]
    guarantee = next(t for t in data[0]["figure"]["data"] if t["name"] == "guarantee")
    assert set(guarantee["y"]) == {6.0}  # the allocation's first version: 6/10
    # No inline script: only the JSON data element and the two static files.
    assert len(re.findall(r"<script(?![^>]*(src=|application/json))", html)) == 0


def test_the_usage_page_names_a_bad_parameter(client, june_usage, lead_a):
    client.force_login(lead_a)
    response = client.get("/usage/?cluster=demo&start=2025-06-30&end=2025-06-01")
    assert (
        response.status_code == 400 and "end: must not be before start" in response.content.decode()
    )
    assert client.get("/usage/?team=team-b").status_code == 400


def test_plotly_js_is_found_in_the_plotly_package_only_under_vendor():
    path = finders.find("vendor/plotly.min.js")
    assert path and path.endswith("plotly/package_data/plotly.min.js")
    assert finders.find("vendor/widgetbundle.js") is None
    listed = [p for finder in finders.get_finders() for p, _ in finder.list([]) if "plotly" in p]
    # The package's bundle once; the portal's own empty sheet that plotly writes its rules into,
    # and the portal's own Chinese words for plotly's buttons.
    assert sorted(listed) == [
        "plotly.min.js",
        "portal/plotly-global.css",
        "portal/plotly_locale_zh.js",
    ]


def test_values_in_force_and_figures_by_hand():
    steps = [
        AllocationStep(date(2025, 6, 10), Decimal(4), Decimal(8)),
        AllocationStep(date(2025, 6, 20), Decimal(2), Decimal(4)),
    ]
    assert in_force(steps, date(2025, 6, 1)).guarantee == 4  # before the first: the first
    assert in_force(steps, date(2025, 6, 20)).cap == 4
    assert in_force([], date(2025, 6, 1)) is None
    usage, hours = (checked(f) for f in usage_figures(title="ns", unit="GPU", days=[], steps=steps))
    assert [t["name"] for t in usage["data"]] == [
        "peak allocated",
        "mean allocated",
        "pending peak",
        "guarantee",
        "cap",
    ]
    assert hours["layout"]["barmode"] == "group"
