"""The request form and its live check (POST /requests/validate/, /requests/<id>/validate/):
the same forms and services as a submit, nothing saved, the answers named by field; who may
ask; the no-script Check button; the impact preview and the admins' dry-run diff."""

import re

import pytest

from approvals.lifecycle import request_create
from approvals.lines import LineInput
from approvals.models import QuotaRequest
from quotas.kube.sync import cluster_sync
from quotas.models import AuditEvent, Cluster, PriorityClass, TeamMembership
from quotas.services import allocation_set
from tests.support.people import make_user
from tests.support.requests import line_data, new_request

pytestmark = pytest.mark.django_db


@pytest.fixture
def member_c(plan):
    user = make_user("member-c")
    TeamMembership.objects.create(
        team=plan["team-c"].team, user=user, role=TeamMembership.Role.MEMBER
    )
    return user


@pytest.fixture
def draft(plan, lead_c, gpu):
    return new_request(lead_c, plan["team-c"], gpu, 3, 6)


def answer_of(response) -> dict:
    assert response.status_code == 200, response.content
    return response.json()


def field(answer: dict, name: str) -> dict:
    found = [f for f in answer["fields"] if f["name"] == name]
    assert found, f"no answer for {name}: {answer['fields']}"
    return found[0]


def edit_data(ns, gpu, guarantee, cap, **extra) -> dict:
    data = line_data(ns, gpu, guarantee, cap, **extra)
    data["lines-INITIAL_FORMS"] = "1"
    return data


# --- the answers ------------------------------------------------------------------------------


def test_guarantee_above_cap_is_named_at_its_field_with_the_rule_and_nothing_is_saved(
    client, plan, lead_c, gpu
):
    client.force_login(lead_c)
    events = AuditEvent.objects.count()
    answer = answer_of(client.post("/requests/validate/", line_data(plan["team-c"], gpu, 5, 4)))
    guarantee = field(answer, "lines-0-guarantee")
    assert guarantee["id"] == "id_lines-0-guarantee"
    assert [e["message"] for e in guarantee["errors"]] == [
        "Line 1, guarantee: guarantee 5 exceeds cap 4 for team-c-dev nvidia.com/gpu "
        "(guarantee ≤ cap)"
    ]
    # Not checked against the plan: the panel says why, with no figures of other values.
    assert answer["ok"] is False and answer["checked"] is False
    assert 'data-testid="impact-blocked"' in answer["impact_html"]
    assert "impact-guaranteed" not in answer["impact_html"]
    assert not QuotaRequest.objects.exists()
    assert AuditEvent.objects.count() == events  # the check's audit rows were rolled back


def test_a_plan_rule_is_placed_at_its_field_with_its_warnings_and_the_impact(
    client, plan, lead_c, gpu
):
    client.force_login(lead_c)
    answer = answer_of(client.post("/requests/validate/", line_data(plan["team-c"], gpu, 3, 9)))
    cap = field(answer, "lines-0-cap")
    assert cap["errors"] == [
        {
            "message": "Line 1, cap: cap 9 exceeds 50% of cluster demo capacity 16 nvidia.com/gpu "
            "(max 8)",
            "code": "cap_le_share",
        }
    ]
    assert cap["warnings"] == ["cap rises from 4 to 9 (×2.3)"]
    html = answer["impact_html"]
    # The seed plan guarantees 6 + 4 + 2 of 16; team-c goes from 2 to 3 (12.5% to 18.8%).
    assert 'data-testid="impact-guaranteed">12 → 13<' in html
    assert 'data-testid="impact-free">4 → 3<' in html
    assert 'data-testid="impact-team-share">2 (12.5%) → 3 (18.8%)<' in html
    assert "A submit would be refused" in html
    assert "Changes in the clusters" not in html  # leads see no cluster objects


def test_the_impact_counts_what_a_lending_grant_gives_back(
    client, plan, lead_a, lead_c, gpu, admin, strict_policy
):
    """Team A lent 4 of its 6 GPUs for a while: the allocations sum to 8, but 12 are
    promised, as the rules count them."""
    from datetime import timedelta

    from django.utils import timezone

    from approvals.lifecycle import request_approve, request_submit

    lend = request_create(
        team=plan["team-a"].team,
        acting_user=lead_a,
        justification="lend for a week",
        lines=[LineInput(plan["team-a"].pk, gpu.pk, 2, 10)],
        kind=QuotaRequest.Kind.TEMPORARY,
        ends_at=timezone.now() + timedelta(days=7),
    )
    request_submit(request=lend, acting_user=lead_a)
    request_approve(request=lend, acting_user=admin)
    client.force_login(lead_c)
    answer = answer_of(client.post("/requests/validate/", line_data(plan["team-c"], gpu, 3, 6)))
    assert 'data-testid="impact-guaranteed">12 → 13<' in answer["impact_html"]
    assert 'data-testid="impact-free">4 → 3<' in answer["impact_html"]


def test_a_request_that_fits_says_who_must_approve(client, plan, lead_c, gpu, strict_policy):
    client.force_login(lead_c)
    answer = answer_of(client.post("/requests/validate/", line_data(plan["team-c"], gpu, 3, 6)))
    assert answer["ok"] is True and answer["fields"] == []
    assert "Needs the approval of 1 platform admin." in answer["impact_html"]
    assert 'data-testid="impact-clean"' in answer["impact_html"]


def test_a_blank_justification_does_not_stop_the_lines_being_checked(client, plan, lead_c, gpu):
    client.force_login(lead_c)
    data = line_data(plan["team-c"], gpu, 3, 9, justification="")
    answer = answer_of(client.post("/requests/validate/", data))
    assert field(answer, "justification")["errors"] == [
        {"message": "This field is required.", "code": "required"}
    ]
    assert field(answer, "lines-0-cap")["errors"][0]["code"] == "cap_le_share"
    assert answer["impact_html"] is not None


def test_the_services_refusal_of_a_date_names_its_field(client, plan, lead_c, gpu):
    client.force_login(lead_c)
    data = line_data(plan["team-c"], gpu, 3, 6, kind="temporary")
    answer = answer_of(client.post("/requests/validate/", data))
    assert field(answer, "ends_at")["errors"][0]["message"] == (
        "a temporary request needs an end (ends_at)"
    )


def test_a_cluster_wide_finding_lands_on_the_line_of_its_cluster_and_resource(
    client, plan, lead_c, gpu
):
    client.force_login(lead_c)
    answer = answer_of(client.post("/requests/validate/", line_data(plan["team-c"], gpu, 7, 8)))
    messages = [e["message"] for e in field(answer, "lines-0-guarantee")["errors"]]
    assert messages == [
        "Line 1, guarantee: guarantees on cluster demo would sum to 17 nvidia.com/gpu, above its "
        "capacity 16 "
        "(free to guarantee: 4)"
    ]


def test_nothing_filled_in_yet_answers_nothing(client, plan, lead_c, gpu):
    client.force_login(lead_c)
    data = line_data(plan["team-c"], gpu, 0, 0)
    for key in ("lines-0-team_namespace", "lines-0-resource", "lines-0-guarantee", "lines-0-cap"):
        data[key] = ""
    answer = answer_of(client.post("/requests/validate/", data))
    impact = answer.pop("impact_html")
    assert answer == {"ok": True, "checked": False, "fields": [], "messages": []}
    assert 'data-testid="impact-empty"' in impact


def test_the_edit_check_judges_the_new_lines_and_keeps_the_draft(client, draft, plan, lead_c, gpu):
    client.force_login(lead_c)
    url = f"/requests/{draft.pk}/validate/"
    answer = answer_of(client.post(url, edit_data(plan["team-c"], gpu, 3, 9)))
    assert field(answer, "lines-0-cap")["errors"][0]["code"] == "cap_le_share"
    draft.refresh_from_db()
    assert draft.lines.get().requested_cap == 6 and draft.status == QuotaRequest.Status.DRAFT


# --- who may ask --------------------------------------------------------------------------------


def test_the_check_is_post_only_and_csrf_protected(client, plan, lead_c, gpu):
    client.force_login(lead_c)
    assert client.get("/requests/validate/").status_code == 405
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(lead_c)
    response = strict.post("/requests/validate/", line_data(plan["team-c"], gpu, 3, 6))
    assert response.status_code == 403


def test_anonymous_is_sent_to_login(client, plan, gpu, draft):
    for url in ("/requests/validate/", f"/requests/{draft.pk}/validate/"):
        response = client.post(url, line_data(plan["team-c"], gpu, 3, 6))
        assert response.status_code == 302 and response.url.startswith("/login/")


def test_a_lead_may_not_check_for_another_team(client, plan, lead_a, gpu):
    client.force_login(lead_a)
    response = client.post("/requests/validate/", line_data(plan["team-c"], gpu, 3, 6))
    assert response.status_code == 403
    assert response.json()["message"] == (
        "only leads of team-c (or platform admins) may request quota for it"
    )


@pytest.mark.parametrize(
    ("who", "status"),
    [("admin", 200), ("auditor", 403), ("lead_c", 200), ("member_c", 403), ("lead_a", 403)],
)
def test_who_may_check_a_new_request(client, request, plan, gpu, who, status):
    client.force_login(request.getfixturevalue(who))
    response = client.post("/requests/validate/", line_data(plan["team-c"], gpu, 3, 6))
    assert response.status_code == status


@pytest.mark.parametrize(
    ("who", "status"),
    [("admin", 200), ("auditor", 403), ("lead_c", 200), ("member_c", 403), ("lead_a", 404)],
)
def test_who_may_check_an_edit(client, request, draft, plan, gpu, who, status):
    client.force_login(request.getfixturevalue(who))
    response = client.post(f"/requests/{draft.pk}/validate/", edit_data(plan["team-c"], gpu, 3, 6))
    assert response.status_code == status


def test_a_submitted_request_is_not_checked_as_an_edit(client, draft, plan, lead_c, gpu):
    QuotaRequest.objects.filter(pk=draft.pk).update(status=QuotaRequest.Status.SUBMITTED)
    client.force_login(lead_c)
    response = client.post(f"/requests/{draft.pk}/validate/", edit_data(plan["team-c"], gpu, 3, 6))
    assert response.status_code == 409
    assert "only drafts and requests sent back for changes are edited" in response.json()["message"]


# --- the pages ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("who", "status"),
    [("admin", 200), ("auditor", 403), ("lead_c", 200), ("member_c", 403)],
)
def test_who_opens_the_new_form(client, request, plan, who, status):
    client.force_login(request.getfixturevalue(who))
    assert client.get("/requests/new/").status_code == status


@pytest.mark.parametrize(
    ("who", "status"),
    [("admin", 200), ("auditor", 403), ("lead_c", 200), ("member_c", 403), ("lead_a", 404)],
)
def test_who_opens_the_edit_form(client, request, draft, who, status):
    client.force_login(request.getfixturevalue(who))
    assert client.get(f"/requests/{draft.pk}/edit/").status_code == status


def test_the_form_points_its_script_at_the_check_and_labels_every_line_field(client, plan, lead_c):
    client.force_login(lead_c)
    page = client.get("/requests/new/").content.decode()
    assert 'data-validate-url="/requests/validate/"' in page
    assert 'src="/static/approvals/request-form.js"' in page
    for name in ("team_namespace", "resource", "guarantee", "cap", "per_pod_max"):
        assert f'<label class="sr-only" for="id_lines-0-{name}">' in page
    assert "<script>" not in page and " style=" not in page  # the CSP allows neither


def test_the_edit_form_shows_the_current_values_it_was_written_against(
    client, plan, lead_c, gpu, admin
):
    PriorityClass.objects.create(name="experiment", value=100)
    allocation_set(
        team_namespace=plan["team-c"],
        resource=gpu,
        guarantee=2,
        cap=4,
        per_pod_max=2,
        priority_classes=["experiment"],
        acting_user=admin,
    )
    draft = request_create(
        team=plan["team-c"].team,
        acting_user=lead_c,
        justification="more",
        lines=[LineInput(plan["team-c"].pk, gpu.pk, 3, 5)],
    )
    client.force_login(lead_c)
    page = client.get(f"/requests/{draft.pk}/edit/").content.decode()
    assert f'data-validate-url="/requests/{draft.pk}/validate/"' in page
    # The kept per-pod max and classes are real values in the fields, not placeholders.
    assert 'name="lines-0-per_pod_max" value="2"' in page
    assert '<option value="experiment" selected>experiment</option>' in page
    assert "2 / 4 (pod ≤ 2) [experiment]" in page  # the current cell, before any script


def test_the_check_button_without_a_script_shows_errors_warnings_and_impact(
    client, plan, lead_c, gpu
):
    client.force_login(lead_c)
    data = line_data(plan["team-c"], gpu, 3, 9, action="check")
    response = client.post("/requests/new/", data)
    page = response.content.decode()
    assert response.status_code == 200
    assert (
        '<div class="field-errors" id="id_lines-0-cap_error"><p class="error" '
        'data-testid="error-lines-0-cap">Line 1, cap: cap 9 exceeds 50%' in page
    )
    assert 'aria-describedby="id_lines-0-cap_error id_lines-0-cap_warning"' in page
    assert '<p class="warning">cap rises from 4 to 9 (×2.3)</p>' in page
    assert 'data-testid="impact-guaranteed">12 → 13<' in page
    assert not QuotaRequest.objects.exists()


def test_a_refused_submit_shows_the_same_error_at_the_same_field(client, plan, lead_c, gpu):
    client.force_login(lead_c)
    response = client.post("/requests/new/", line_data(plan["team-c"], gpu, 3, 9, action="submit"))
    assert response.status_code == 400
    page = response.content.decode()
    assert (
        '<div class="field-errors" id="id_lines-0-cap_error"><p class="error" '
        'data-testid="error-lines-0-cap">Line 1, cap: cap 9 exceeds 50%' in page
    )
    # The impact panel shows what the form holds, not the empty panel of a new form.
    assert 'data-testid="impact-guaranteed">12 → 13<' in page
    assert 'data-testid="impact-empty"' not in page


def test_the_admins_check_has_the_dry_run_diff_of_the_cluster_objects(
    client, plan, lead_c, admin, gpu, kube_sandbox
):
    cluster = plan["team-c"].cluster
    Cluster.objects.filter(pk=cluster.pk).update(sandbox_url=kube_sandbox.url)
    assert cluster_sync(cluster_id=cluster.pk).status == "succeeded"
    kube_sandbox.stats.reset()
    client.force_login(admin)
    data = {**line_data(plan["team-c"], gpu, 3, 6), "clusters": "1"}
    html = answer_of(client.post("/requests/validate/", data))["impact_html"]
    assert "Changes in the clusters (dry run)" in html and 'data-testid="preview-demo"' in html
    assert "spec.hard.requests.nvidia.com/gpu</code>: 4 → 6" in html
    assert kube_sandbox.stats.writes == 0
    # Without asking (each keystroke), no cluster is called.
    quiet = answer_of(client.post("/requests/validate/", line_data(plan["team-c"], gpu, 3, 6)))
    assert "Changes in the clusters" not in quiet["impact_html"]
    # The same on the page's Check button, without a script.
    page = client.post("/requests/new/", line_data(plan["team-c"], gpu, 3, 6, action="check"))
    assert "spec.hard.requests.nvidia.com/gpu</code>: 4 → 6" in page.content.decode()
    client.force_login(lead_c)
    html = answer_of(client.post("/requests/validate/", data))["impact_html"]
    assert "Changes in the clusters" not in html


def _chosen_team(body: str) -> list[str]:
    select = body[body.index('name="team"') : body.index("</select>", body.index('name="team"'))]
    return re.findall(r'<option value="(\d+)" selected>', select)


def test_a_lead_of_one_team_finds_it_chosen(client, plan, lead_c):
    client.force_login(lead_c)
    body = client.get("/requests/new/").content.decode()
    assert _chosen_team(body) == [str(plan["team-c"].team_id)]


def test_a_lead_of_two_teams_chooses(client, plan, lead_c):
    TeamMembership.objects.create(
        team=plan["team-a"].team, user=lead_c, role=TeamMembership.Role.LEAD
    )
    client.force_login(lead_c)
    assert _chosen_team(client.get("/requests/new/").content.decode()) == []
    # The dashboard's link names the team.
    team_id = plan["team-a"].team_id
    body = client.get(f"/requests/new/?team={team_id}").content.decode()
    assert _chosen_team(body) == [str(team_id)]


def test_an_admin_chooses_among_every_team(client, plan, admin):
    client.force_login(admin)
    assert _chosen_team(client.get("/requests/new/").content.decode()) == []


# --- what was typed, said in words ------------------------------------------------------------


def test_letters_in_an_amount_are_named_at_the_field_and_kept_as_typed(client, plan, lead_c, gpu):
    client.force_login(lead_c)
    answer = answer_of(
        client.post("/requests/validate/", line_data(plan["team-c"], gpu, 2, "1x2e"))
    )
    assert [e["message"] for e in field(answer, "lines-0-cap")["errors"]] == [
        "Line 1, cap: give an amount as plain digits, such as 4 or 0.5, got '1x2e'"
    ]
    assert 'data-testid="impact-blocked"' in answer["impact_html"]
    assert "approved automatically" not in answer["impact_html"]

    data = line_data(plan["team-c"], gpu, 2, "1x2e", action="submit")
    response = client.post("/requests/new/", data)
    page = response.content.decode()
    assert response.status_code == 400
    # A text field: what was typed comes back as typed (a number input would drop it).
    cap = re.search(r'<input[^>]*name="lines-0-cap"[^>]*>', page).group(0)
    assert 'type="text"' in cap and 'inputmode="decimal"' in cap and 'value="1x2e"' in cap
    assert (
        'data-testid="error-lines-0-cap">Line 1, cap: give an amount as plain digits, such as 4 '
        "or 0.5, got &#x27;1x2e&#x27;<" in page
    )
    assert 'data-testid="impact-blocked"' in page
    assert not QuotaRequest.objects.exists()


def test_a_service_refusal_loses_the_apis_way_of_naming_the_field(client, plan, admin, gpu):
    client.force_login(admin)
    # An admin may choose any team's namespace in the form; the service refuses another's.
    data = line_data(plan["team-a"], gpu, 1, 2)
    data["team"] = str(plan["team-c"].team_id)
    answer = answer_of(client.post("/requests/validate/", data))
    [message] = [e["message"] for e in field(answer, "lines-0-team_namespace")["errors"]]
    assert message == (
        f"Line 1, namespace: namespace {plan['team-a'].pk} does not belong to team team-c"
    )


def test_line_messages_are_numbered_as_the_page_shows_the_lines(client, plan, lead_c, gpu):
    client.force_login(lead_c)
    data = line_data(plan["team-c"], gpu, 1, 2)
    data.update(
        {
            "lines-2-team_namespace": str(plan["team-c"].pk),
            "lines-2-resource": str(gpu.pk),
            "lines-2-guarantee": "-1",
            "lines-2-cap": "2",
        }
    )
    answer = answer_of(client.post("/requests/validate/", data))
    [message] = [e["message"] for e in field(answer, "lines-2-guarantee")["errors"]]
    assert message.startswith("Line 3, guarantee: ")
