"""The charts as a person sees them in Chromium, in 简体中文: a chart of one day draws its
legend and plotly's own buttons in Chinese, ticks written as days (never "23:59:59.9995"),
and the team's usage in the team's own colour on the dashboard and on /usage/ alike."""

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from common import palette
from quotas.models import Team
from usage.models import UsageDaily

pytestmark = pytest.mark.django_db(transaction=True)

DAY = re.compile(r"\d{4}-\d{2}-\d{2}\Z")
ENGLISH_WORD = re.compile(r"[A-Za-z]{3,}")


def _rgb(hex_colour: str) -> str:
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


@pytest.fixture
def one_day(plan, gpu, lead_a):
    UsageDaily.objects.create(
        team_namespace=plan["team-a"],
        resource=gpu,
        day=timezone.localdate() - timedelta(days=1),
        source="cluster",
        samples=288,
        peak=Decimal(7),
        p95=Decimal(6),
        mean=Decimal(5),
        gpu_hours=Decimal(120),
        borrowed_gpu_hours=Decimal(12),
        idle_guaranteed_gpu_hours=Decimal(0),
        guarantee=Decimal(6),
    )
    return lead_a


def _chinese_session(browser, live_server):
    context = browser.new_context(
        base_url=live_server.url, viewport={"width": 1366, "height": 900}, locale="zh-CN"
    )
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.goto("/login/")
    page.fill("#id_username", "lead-a")
    page.fill("#id_password", "pw")
    page.click("main button[type=submit]")
    page.wait_for_selector("[data-testid=current-user]:has-text('lead-a')")
    return context, page


def _drawn(page, selector: str):
    chart = page.locator(selector).first
    expect(chart).to_have_attribute("data-drawn", "true")
    return chart


def _peak_colour(chart) -> str:
    line = chart.locator(".scatterlayer .trace").first.locator("path.js-line")
    return line.evaluate("el => getComputedStyle(el).stroke")


def test_a_one_day_chart_in_chinese_has_a_legend_day_ticks_and_the_team_colour(
    browser, live_server, artifacts, one_day
):
    colours = palette.team_colours(Team.objects.values_list("slug", flat=True))
    team_a = _rgb(colours["team-a"])
    context, page = _chinese_session(browser, live_server)
    try:
        page.goto("/")
        chart = _drawn(page, "[data-testid=team-team-a] .chart")
        legend = chart.locator(".legendtext")
        expect(legend).to_have_count(4)  # peak, mean, guarantee, cap
        names = legend.all_text_contents()
        assert "保障量" in names and "上限" in names
        assert not [n for n in names if ENGLISH_WORD.search(n)], names
        ticks = chart.locator(".xtick text").all_text_contents()
        assert ticks and all(DAY.match(t) for t in ticks), ticks
        assert _peak_colour(chart) == team_a
        # plotly.js' own buttons speak Chinese too (static/portal/plotly_locale_zh.js).
        titles = chart.locator(".modebar-btn").evaluate_all(
            "buttons => buttons.map(b => b.getAttribute('data-title'))"
        )
        assert titles, "no modebar"
        assert not [t for t in titles if ENGLISH_WORD.search(t.replace("PNG", ""))], titles
        page.screenshot(path=str(artifacts / "one-day-dashboard-zh.png"), full_page=True)

        page.goto("/usage/?team=team-a")
        chart = _drawn(page, "#chart-0-0")
        names = chart.locator(".legendtext").all_text_contents()
        assert len(names) == 5 and not [n for n in names if ENGLISH_WORD.search(n)], names
        title = chart.locator(".gtitle").text_content()
        assert not ENGLISH_WORD.search(title.replace("team-a-training", "")), title
        ticks = chart.locator(".xtick text").all_text_contents()
        assert ticks and all(DAY.match(t) for t in ticks), ticks
        assert _peak_colour(chart) == team_a
        bars = _drawn(page, "#chart-0-1")
        # One bar trace per meaning, each in its palette colour, and both in the legend.
        assert bars.locator(".legendtext").count() == 2
        fills = bars.locator(".barlayer .trace").evaluate_all(
            "traces => traces.map(t => t.querySelector('path') &&"
            " getComputedStyle(t.querySelector('path')).fill)"
        )
        assert _rgb(palette.BORROWED) in fills
        page.screenshot(path=str(artifacts / "one-day-usage-zh.png"), full_page=True)
    finally:
        context.close()


MONTH = re.compile(r"\d{4}-\d{2}\Z")


def test_the_showback_charts_in_chinese_stack_the_teams_by_month(
    browser, live_server, artifacts, one_day, plan, gpu
):
    this_month = timezone.localdate().replace(day=1)
    UsageDaily.objects.create(
        team_namespace=plan["team-b"],
        resource=gpu,
        day=this_month - timedelta(days=20),
        source="cluster",
        samples=288,
        peak=Decimal(4),
        p95=Decimal(4),
        mean=Decimal(4),
        gpu_hours=Decimal(96),
        borrowed_gpu_hours=Decimal(0),
        idle_guaranteed_gpu_hours=Decimal(0),
    )
    context, page = _chinese_session(browser, live_server)
    try:
        page.goto("/showback/")
        expect(page.locator("[data-testid=showback-table] tr.others").first).to_be_visible()
        stacked = _drawn(page, "#showback-chart-0")
        names = stacked.locator(".legendtext").all_text_contents()
        assert sorted(names) == ["team-a", "其他团队"], names  # a lead sees the others as one
        ticks = stacked.locator(".xtick text").all_text_contents()
        assert len(ticks) >= 6 and all(MONTH.match(t) for t in ticks), ticks
        title = stacked.locator(".gtitle").text_content()
        assert not ENGLISH_WORD.search(title.replace("GPU", "")), title
        grouped = _drawn(page, "#showback-chart-1")
        names = grouped.locator(".legendtext").all_text_contents()
        assert len(names) == 4 and not [n for n in names if ENGLISH_WORD.search(n)], names
        page.screenshot(path=str(artifacts / "showback-zh.png"), full_page=True)
    finally:
        context.close()
