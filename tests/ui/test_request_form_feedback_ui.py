"""The request form's feedback in a real browser: letters typed in an amount are named at the
field and kept as typed (never checked, submitted or previewed as the old value), errors read
in words tied to the line and field and are shown whole, and a refused submit keeps the impact
of what the form holds."""

import pytest
from playwright.sync_api import expect

from approvals.models import QuotaRequest
from tests.support.browser import live_check_answered

pytestmark = pytest.mark.django_db(transaction=True)

NOT_AN_AMOUNT = "Line 1, cap: give an amount as plain digits, such as 4 or 0.5, got '1x2e'"
OVER_THE_SHARE = "Line 1, cap: cap 9 exceeds 50% of cluster demo capacity 16 nvidia.com/gpu (max 8)"


def _choose_the_line(lead):
    lead.goto("/requests/new/")
    lead.select_option("#id_team", label="team-c")
    row = lead.locator("[data-testid=line-0]")
    row.locator("select[name=lines-0-team_namespace]").select_option(label="team-c-dev (demo)")
    row.locator("select[name=lines-0-resource]").select_option(label="A100 card (nvidia.com/gpu)")
    expect(row.locator("input[name=lines-0-cap]")).to_have_value("4")  # prefilled
    return row


def _shown_whole(locator) -> None:
    """The text fits its own box, and the box is inside the window and inside every box
    around it that clips (a table's scroll box, a card): nothing of it is cut off."""
    cut = locator.evaluate(
        """el => {
          const r = el.getBoundingClientRect();
          const cut = [];
          if (el.scrollWidth - el.clientWidth > 1) cut.push("its own box");
          if (r.left < 0 || r.right > window.innerWidth + 1) cut.push("the window");
          for (let up = el.parentElement; up; up = up.parentElement) {
            if (getComputedStyle(up).overflowX === "visible") continue;
            const u = up.getBoundingClientRect();
            if (r.left < u.left - 1 || r.right > u.right + 1) cut.push(up.className || up.tagName);
          }
          return cut;
        }"""
    )
    assert cut == [], f"cut off by {cut}"


def test_letters_in_an_amount_are_named_kept_and_never_taken_for_the_old_value(
    open_session, artifacts, plan, lead_c, gpu, strict_policy
):
    lead = open_session("lead-c")
    row = _choose_the_line(lead)
    cap = row.locator("input[name=lines-0-cap]")

    # Typed key by key as a person does: the check is sent what was typed.
    cap.fill("")
    with live_check_answered(lead, {"lines-0-cap": "1x2e"}):
        cap.press_sequentially("1x2e")
    error = lead.locator("#id_lines-0-cap_error")
    expect(error).to_have_text(NOT_AN_AMOUNT)
    _shown_whole(error)
    expect(cap).to_have_value("1x2e")
    expect(cap).to_have_attribute("aria-invalid", "true")
    impact = lead.locator("[data-testid=impact]")
    expect(impact.locator("[data-testid=impact-blocked]")).to_be_visible()
    expect(impact).not_to_contain_text("approved automatically")
    lead.screenshot(path=str(artifacts / "request-letters-in-cap.png"), full_page=True)

    # Submitted as it is: refused, sent back as typed, with the same words at the field, also
    # once the sent-back page's own check has answered.
    lead.fill("#id_justification", "one more card")
    # The submit, and the check the sent-back page sends as it loads: both awaited.
    with live_check_answered(lead, {"lines-0-cap": "1x2e"}), lead.expect_navigation():
        lead.click("[data-testid=submit]")
    expect(cap).to_have_value("1x2e")
    expect(lead.locator("[data-testid=error-lines-0-cap]")).to_have_text(NOT_AN_AMOUNT)
    expect(impact.locator("[data-testid=impact-blocked]")).to_be_visible()
    expect(impact).not_to_contain_text("approved automatically")
    assert not QuotaRequest.objects.exists()


def test_a_refused_submit_names_the_line_shows_the_error_whole_and_keeps_the_impact(
    open_session, artifacts, plan, lead_c, gpu, strict_policy
):
    lead = open_session("lead-c")
    row = _choose_the_line(lead)
    row.locator("input[name=lines-0-guarantee]").fill("3")
    row.locator("input[name=lines-0-cap]").fill("9")
    lead.fill("#id_justification", "one big run")
    # The submit, and the check the sent-back page sends as it loads: both awaited.
    with (
        live_check_answered(lead, {"lines-0-guarantee": "3", "lines-0-cap": "9"}),
        lead.expect_navigation(),
    ):
        lead.click("[data-testid=submit]")

    error = lead.locator("[data-testid=error-lines-0-cap]")
    expect(error).to_have_text(OVER_THE_SHARE)
    expect(lead.locator("[data-testid=line-0]")).not_to_contain_text("lines[0]")
    _shown_whole(error)
    # The impact of the lines in the form, not the empty panel of a new form.
    expect(lead.locator("[data-testid=impact-empty]")).to_have_count(0)
    expect(lead.locator("[data-testid=impact-guaranteed]")).to_have_text("12 → 13")
    expect(lead.locator("[data-testid=impact-errors]")).to_contain_text("cap 9 exceeds 50%")
    lead.screenshot(path=str(artifacts / "request-refused-impact.png"), full_page=True)
    assert not QuotaRequest.objects.exists()

    # On a phone the message still wraps in its box rather than running on as one line.
    lead.set_viewport_size({"width": 390, "height": 844})
    assert error.evaluate("el => el.scrollWidth - el.clientWidth") <= 1
