"""The suggestions page's "How suggestions did" panel (usage/backtest.py) in a real Chromium:
on a laptop and on a phone, in English and in Chinese, nothing reachable outside the page, and
on a phone its rows stacked, each figure after its column's label (the checks of
tests/ui/test_widths_ui.py)."""

import pytest

from tests.support.usage import JUNE, backtest_months_create
from tests.support.widths import (
    CHECK_PAGE,
    CHECK_STACKED,
    ENGLISH_WORDS,
    LAPTOP,
    LOCALES,
    PHONE,
)
from usage.backtest import backtest_compute

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("language", list(LOCALES))
def test_the_panel_fits_a_laptop_and_a_phone(
    browser,
    live_server,
    cluster,
    alloc_a,
    alloc_b,
    gpu,
    lead_a,
    language,
):
    backtest_months_create(alloc_a, alloc_b, gpu)
    backtest_compute(cluster=cluster, month=JUNE)
    context = browser.new_context(
        base_url=live_server.url, viewport=LAPTOP, locale=LOCALES[language]
    )
    context.set_default_timeout(30_000)
    page = context.new_page()
    try:
        page.goto("/login/")
        page.fill("#id_username", "lead-a")
        page.fill("#id_password", "pw")
        page.click("main button[type=submit]")
        page.wait_for_selector("[data-testid=current-user]:has-text('lead-a')")
        page.goto("/suggestions/")
        panel = page.locator("[data-testid=backtest-demo]")
        panel.wait_for()
        assert panel.locator("[data-testid=backtest-2025-06-hindsight]").count() == 1
        problems = []
        for viewport in (LAPTOP, PHONE):
            page.set_viewport_size(viewport)
            found = page.evaluate(CHECK_PAGE)
            problems += found["outside"]
            if found["scrollWidth"] > found["width"]:
                problems.append(f"the page scrolls sideways at {viewport['width']} px")
            if viewport is PHONE:
                stacked = page.evaluate(CHECK_STACKED)
                problems += stacked["problems"]
                if language == "zh-hans":
                    problems += [
                        f"untranslated column label {label!r}"
                        for label in stacked["labels"]
                        if ENGLISH_WORDS.fullmatch(label)
                    ]
        assert problems == []
    finally:
        context.close()
