"""Every page at a laptop's width (1366 px) and a phone's (390 px), in English and in
Simplified Chinese, as a team lead, a platform admin and the read-only viewer, on the demo's
data (two clusters, one of MIG slices) with a month of usage, suggestions, requests and tokens.

Everywhere: no actionable control (link, button, input, select, text area) and no column header
lies outside the viewport sideways (also not scrolled away inside a table's box), and nothing
makes the page itself scroll sideways. On the phone: the rows of a table of more than three
columns stack, each cell on its own line under its column's label, and those labels are in the
reader's language; the charts keep their titles inside the chart and their date labels apart."""

import io
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone

from approvals.lifecycle import request_create, request_submit
from approvals.lines import LineInput
from approvals.models import ApprovalPolicy
from portal.tokens import api_token_create
from quotas.models import Cluster, Resource, Team, TeamNamespace
from usage.models import UsageDaily, UsageSample
from usage.suggestions import suggestions_compute

pytestmark = pytest.mark.django_db(transaction=True)

LAPTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}
LOCALES = {"en": "en-US", "zh-hans": "zh-CN"}

# What may be outside the viewport: nothing a person can reach or a column's name.
CHECK_PAGE = """() => {
  const width = document.documentElement.clientWidth;
  const shown = (el) => {
    if (el.closest('template, [hidden]')) return null;
    const r = el.getBoundingClientRect();
    if (r.width <= 1 && r.height <= 1) return null;  // not rendered, or visually hidden
    if (getComputedStyle(el).visibility === 'hidden') return null;
    // Inside a visually hidden box (a stacked table's column headers, kept for screen readers).
    for (let a = el.parentElement; a; a = a.parentElement) {
      const box = a.getBoundingClientRect();
      const clipped = getComputedStyle(a).overflow !== 'visible';
      if (box.width <= 1 && box.height <= 1 && clipped) return null;
    }
    return r;
  };
  const name = (el) => {
    const text = (el.innerText || el.value || el.getAttribute('aria-label') || '').trim();
    return el.tagName.toLowerCase() + (el.name ? '[name=' + el.name + ']' : '')
      + (text ? ' "' + text.slice(0, 40).replace(/\\s+/g, ' ') + '"' : '');
  };
  const outside = [];
  const selector = 'a[href], button, input:not([type=hidden]), select, textarea, '
    + 'th[scope=col], thead th';
  for (const el of document.querySelectorAll(selector)) {
    if (el.closest('.js-plotly-plot')) continue;  // plotly's own tool bar, drawn inside the chart
    const r = shown(el);
    if (r && (r.left < -1 || r.right > width + 1)) {
      outside.push(name(el) + ' at ' + Math.round(r.left) + '..' + Math.round(r.right));
    }
  }
  return {width, scrollWidth: document.documentElement.scrollWidth, outside};
}"""

# On a phone: the rows of every table of more than three columns stack (no two cells of a row
# side by side), each cell with its column's label shown before it; a grid of figures (numbers
# after a first column) may stay a grid where it fits.
CHECK_STACKED = r"""() => {
  const problems = [], labels = [];
  for (const table of document.querySelectorAll('main table')) {
    if (!table.getClientRects().length || table.closest('details:not([open])')) continue;
    const headers = [...table.querySelectorAll('thead tr:last-child th')];
    if (headers.length <= 3) continue;
    // A grid of figures (a day per row, numbers after it) stays a grid, as long as it fits.
    if (headers.slice(1).every((th) => th.classList.contains('num'))) continue;
    const what = table.dataset.testid || table.className || 'table';
    for (const row of table.querySelectorAll('tbody tr')) {
      const cells = [...row.children]
        .filter((c) => c.getClientRects().length && c.innerText.trim());
      const boxes = cells.map((c) => c.getBoundingClientRect()).sort((a, b) => a.top - b.top);
      for (let i = 1; i < boxes.length; i++) {
        if (boxes[i].top < boxes[i - 1].bottom - 1) {
          const text = row.innerText.slice(0, 50).replace(/\s+/g, ' ');
          problems.push(what + ': cells side by side in "' + text + '"');
          break;
        }
      }
      for (const cell of cells) {
        if (cell.tagName !== 'TD' || cell.colSpan > 1) continue;
        // A cell of buttons or links only (Revoke, Review and request) names itself.
        const controls = [...cell.querySelectorAll('a, button, label')]
          .map((c) => c.innerText).join('');
        if (controls.replace(/\s/g, '') === cell.innerText.replace(/\s/g, '')) continue;
        const label = getComputedStyle(cell, '::before').content;
        if (!label || label === 'none' || label === '""' || label === 'normal') {
          const text = cell.innerText.slice(0, 30).replace(/\s+/g, ' ');
          problems.push(what + ': a cell without its column label: "' + text + '"');
        } else {
          labels.push(cell.dataset.label || '');
        }
      }
    }
  }
  return {problems: [...new Set(problems)], labels: [...new Set(labels)]};
}"""

# On a phone: every chart's title inside the chart, and its x axis' labels apart.
CHECK_CHARTS = """() => {
  const problems = [];
  for (const chart of document.querySelectorAll('.js-plotly-plot')) {
    const box = chart.getBoundingClientRect();
    const id = chart.id;
    for (const title of chart.querySelectorAll('.gtitle')) {
      const r = title.getBoundingClientRect();
      if (r.width && (r.left < box.left - 1 || r.right > box.right + 1)) {
        problems.push(id + ': title cut: "' + title.textContent + '" ' + Math.round(r.left)
          + '..' + Math.round(r.right) + ' in ' + Math.round(box.left) + '..'
          + Math.round(box.right));
      }
    }
    const ticks = [...chart.querySelectorAll('.xtick text')]
      .map((t) => [t.textContent, t.getBoundingClientRect()])
      .filter(([, r]) => r.width).sort((a, b) => a[1].left - b[1].left);
    for (let i = 1; i < ticks.length; i++) {
      const [a, ra] = ticks[i - 1], [b, rb] = ticks[i];
      const apart = rb.left >= ra.right - 1 || rb.top >= ra.bottom - 1 || rb.bottom <= ra.top + 1;
      if (!apart) { problems.push(id + ': date labels overlap: ' + a + ' / ' + b); break; }
    }
    for (const [text, r] of ticks) {
      if (r.left < box.left - 1 || r.right > box.right + 1) {
        problems.push(id + ': label cut: ' + text);
        break;
      }
    }
  }
  return problems;
}"""

# A label in English words (not a code such as nvidia.com/gpu or a cluster · resource pair).
ENGLISH_WORDS = re.compile(r"[A-Za-z][A-Za-z' -]*[a-z]")


def _days(count: int):
    today = timezone.localdate()
    return [today - timedelta(days=back) for back in range(count, 0, -1)]


@pytest.fixture
def demo_world(db):
    """The demo's data (seed_demo), a month of usage on every allocation, last month's
    suggestions, a submitted request and a draft of three lines each, and API tokens."""
    call_command("seed_demo", stdout=io.StringIO(), stderr=io.StringIO())
    users = {u.username: u for u in User.objects.filter(username__in=["admin", "lead-a", "viewer"])}
    for user in users.values():
        user.set_password("pw")  # the personas' password (tests.support.people)
        user.save(update_fields=["password"])
    for cluster in Cluster.objects.all():
        ApprovalPolicy.objects.update_or_create(
            cluster=cluster,
            defaults={"auto_approve_decreases": False, "auto_approve_increase_max": 0},
        )
    now = timezone.now()
    for i, ns in enumerate(TeamNamespace.objects.select_related("cluster").order_by("pk")):
        for allocation in ns.allocations.select_related("resource"):
            guarantee = allocation.guarantee
            for k, day in enumerate(_days(30)):
                mean = guarantee * Decimal("0.5") + Decimal(k % 3)
                UsageDaily.objects.create(
                    team_namespace=ns,
                    resource=allocation.resource,
                    day=day,
                    source="cluster",
                    samples=288,
                    peak=mean + 1,
                    p95=mean + 1,
                    mean=mean,
                    gpu_hours=mean * 24,
                    borrowed_gpu_hours=max(mean - guarantee, Decimal(0)) * 24,
                    idle_guaranteed_gpu_hours=max(guarantee - mean, Decimal(0)) * 24,
                    guarantee=guarantee,
                    pending_peak=Decimal(i % 2),
                    pending_wait_seconds=60 * i,
                    utilization_mean=Decimal(20 + 15 * i),
                )
            # Hourly samples of two days ago (replayed on the request pages), and one now.
            for hours in range(48, 60):
                UsageSample.objects.create(
                    team_namespace=ns,
                    resource=allocation.resource,
                    timestamp=now - timedelta(hours=hours),
                    allocated=guarantee + hours % 3,
                    pending=Decimal(hours % 2),
                    source="cluster",
                )
            UsageSample.objects.create(
                team_namespace=ns,
                resource=allocation.resource,
                timestamp=now - timedelta(minutes=5),
                allocated=guarantee,
                source="cluster",
            )
    last_month = (timezone.localdate().replace(day=1) - timedelta(days=1)).replace(day=1)
    for cluster in Cluster.objects.all():
        suggestions_compute(cluster=cluster, month=last_month)
        # This month's days count too: the suggestions of the current month.
        suggestions_compute(cluster=cluster, month=timezone.localdate())

    lead = users["lead-a"]
    team = Team.objects.get(slug="team-a")
    gpu, slice_1g, slice_3g = (
        Resource.objects.get(name=n)
        for n in ("nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb")
    )
    training = TeamNamespace.objects.get(name="team-a-training")
    inference = TeamNamespace.objects.get(name="team-a-inference")
    lines = [
        LineInput(training.pk, gpu.pk, Decimal(7), Decimal(8), Decimal(4)),
        # The guarantee stays: namespaces allowed the highest class may hold 40% (1.6 slices).
        LineInput(inference.pk, slice_3g.pk, Decimal(1), Decimal(2), Decimal(2)),
        LineInput(inference.pk, slice_1g.pk, Decimal(1), Decimal(2), None),
    ]
    submitted = request_create(
        team=team,
        acting_user=lead,
        justification="Evaluation runs for the quarterly release need more cards.",
        lines=lines,
    )
    request_submit(request=submitted, acting_user=lead, usage_now={})
    draft = request_create(team=team, acting_user=lead, justification="next quarter", lines=lines)
    for username, user in users.items():
        api_token_create(user=user, name=f"nightly-evaluation-pipeline-{username}")
    return {"submitted": submitted.pk, "draft": draft.pk, "gpu": gpu.pk}


def _pages(world: dict) -> list[tuple[str, str]]:
    return [
        ("dashboard", "/"),
        ("requests", "/requests/"),
        ("queue", "/requests/?status=submitted"),
        ("request", f"/requests/{world['submitted']}/"),  # the admin's decision form
        ("new request", "/requests/new/"),
        ("draft form", f"/requests/{world['draft']}/edit/"),
        ("clusters", "/clusters/"),
        ("cluster", "/clusters/demo-mig/"),
        ("summary", "/summary/"),
        ("usage", "/usage/?cluster=demo"),
        ("usage MIG", "/usage/?cluster=demo-mig"),
        ("showback", "/showback/"),
        ("waiting", "/waiting/team-a/"),
        ("suggestions", "/suggestions/"),
        ("audit", "/audit/"),
        ("tokens", "/tokens/"),
    ]


def _wait_for_charts(page) -> None:
    page.wait_for_load_state("networkidle")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.chart')].every("
        "c => c.dataset.drawn === 'true' || !c.closest('body'))",
        timeout=30_000,
    )


@pytest.mark.parametrize("language", list(LOCALES))
@pytest.mark.parametrize("username", ["lead-a", "admin", "viewer"])
def test_every_page_fits_a_laptop_and_a_phone(
    browser, live_server, artifacts, demo_world, username, language
):
    context = browser.new_context(
        base_url=live_server.url, viewport=LAPTOP, locale=LOCALES[language]
    )
    context.set_default_timeout(30_000)
    page = context.new_page()
    problems: list[str] = []
    try:
        page.goto("/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", "pw")
        page.click("main button[type=submit]")
        page.wait_for_selector(f"[data-testid=current-user]:has-text('{username}')")
        if username == "lead-a":  # the form with several lines: add two to the empty ones
            page.goto("/requests/new/")
            page.click("#add-line")
            page.click("#add-line")
        for viewport in (LAPTOP, PHONE):
            page.set_viewport_size(viewport)
            for name, url in _pages(demo_world):
                response = page.goto(url)
                assert response.status < 500, (url, response.status)
                assert page.locator("html").get_attribute("lang") == language, url
                if name == "new request" and username == "lead-a":
                    page.click("#add-line")
                    page.click("#add-line")
                    # A line typed: the live check shows its impact and its last month.
                    row = page.locator("[data-testid=line-0]")
                    row.locator("select[name=lines-0-team_namespace]").select_option(
                        label="team-a-training (demo)"
                    )
                    row.locator("select[name=lines-0-resource]").select_option(
                        value=str(demo_world["gpu"])
                    )
                    page.locator("[data-testid=impact] [data-testid=what-if-table]").wait_for()
                _wait_for_charts(page)
                # What a click shows counts too: the charts' figures, a suggestion's figures.
                page.evaluate(
                    "document.querySelectorAll('details').forEach(d => { d.open = true; })"
                )
                where = f"{name} ({url}) at {viewport['width']} px"
                found = page.evaluate(CHECK_PAGE)
                bad = list(found["outside"])
                if found["scrollWidth"] > found["width"]:
                    bad.append(f"the page scrolls sideways: {found['scrollWidth']} px wide")
                if viewport is PHONE:
                    stacked = page.evaluate(CHECK_STACKED)
                    bad += stacked["problems"]
                    if language == "zh-hans":
                        bad += [
                            f"untranslated column label {label!r}"
                            for label in stacked["labels"]
                            if ENGLISH_WORDS.fullmatch(label)
                        ]
                    bad += page.evaluate(CHECK_CHARTS)
                if bad or (username == "lead-a" and viewport is PHONE):  # a lead's phone: always
                    shot = (
                        f"widths-{username}-{language}-{viewport['width']}-{name.replace(' ', '-')}"
                    )
                    page.screenshot(path=str(artifacts / f"{shot}.png"), full_page=True)
                    problems += [f"{where}: {b}" for b in bad[:30]]
    finally:
        context.close()
    assert not problems, "\n".join(problems)
