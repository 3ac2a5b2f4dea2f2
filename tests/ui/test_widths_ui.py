"""Every page at a laptop's width (1366 px) and a phone's (390 px), in English and in
Simplified Chinese, as a team lead, a platform admin and the read-only viewer, on the demo's
data (two clusters, one of MIG slices) with a month of usage, suggestions, requests and tokens.

Everywhere: no actionable control (link, button, input, select, text area) and no column header
lies outside the viewport sideways (also not scrolled away inside a table's box), and nothing
makes the page itself scroll sideways. On the phone: the rows of a table of more than three
columns stack, each cell on its own line under its column's label, and those labels are in the
reader's language; the charts keep their titles inside the chart and their date labels apart."""

import io
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
from tests.support.browser import wait_until_settled
from tests.support.widths import (
    CHECK_CHARTS,
    CHECK_PAGE,
    CHECK_STACKED,
    ENGLISH_WORDS,
    LAPTOP,
    LOCALES,
    PHONE,
)
from usage.models import UsageDaily, UsageSample
from usage.suggestions import suggestions_compute

pytestmark = pytest.mark.django_db(transaction=True)


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
                wait_until_settled(page)
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
