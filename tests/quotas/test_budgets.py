"""Budgets across clusters: GPUs counted alike on every cluster (a MIG slice by its share of a
card), a team's ceiling over all of them checked on every request (rule team_gpu_ceiling), and
what the GPUs cost where clusters have a price — on plain data, then through requests, the
approval, the summary page, the API, the audit log and the settings check."""

import re
from datetime import timedelta
from decimal import Decimal as D
from fractions import Fraction
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.checks import run_checks
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from approvals.lifecycle import request_approve, request_create
from approvals.lines import Decision, LineInput
from approvals.models import ApprovalPolicy
from common.errors import ValidationFailed
from quotas.budgets import CeilingChange, CeilingFacts, check_ceilings, gpus_per_unit
from quotas.clusters import cluster_save
from quotas.models import (
    Allocation,
    AuditEvent,
    Cluster,
    ClusterCapacity,
    Resource,
    Team,
    TeamNamespace,
)
from quotas.rules import ERROR, RULE_TEAM_GPU_CEILING, WARNING
from quotas.services import allocation_set
from quotas.teams import team_save
from tests.support.api import as_user, body
from tests.support.races import race

MIG = "mig"


@pytest.mark.parametrize(
    ("name", "model", "share"),
    [
        ("nvidia.com/mig-3g.40gb", "A100 80GB", Fraction(1, 2)),  # 4 of 8 memory slices
        ("nvidia.com/mig-1g.10gb", "A100 80GB", Fraction(1, 7)),  # 1 of 7 compute slices
        ("nvidia.com/mig-1g.20gb", "A100 80GB", Fraction(1, 4)),
        ("nvidia.com/mig-2g.20gb", "A100 80GB", Fraction(2, 7)),
        ("nvidia.com/mig-4g.40gb", "A100 80GB", Fraction(4, 7)),
        ("nvidia.com/mig-7g.80gb", "A100 80GB", Fraction(1)),
        ("nvidia.com/mig-1g.6gb", "A30 24GB", Fraction(1, 4)),
        ("nvidia.com/mig-3g.47gb", "", Fraction(1, 2)),  # H100 94GB's, found by its name
    ],
)
def test_a_mig_slice_counts_as_its_share_of_a_card(name, model, share):
    assert gpus_per_unit(kind=MIG, name=name, gpu_model=model) == share


def test_whole_gpus_count_one_and_what_is_not_a_gpu_not_at_all():
    assert gpus_per_unit(kind="gpu", name="nvidia.com/gpu") == 1
    assert gpus_per_unit(kind=MIG, name="nvidia.com/mig-9g.99gb", gpu_model="A100 80GB") is None
    for kind, name in (("vgpu_cores", "nvidia.com/gpucores"), ("cpu", "cpu"), ("memory", "memory")):
        assert gpus_per_unit(kind=kind, name=name) is None
    # Seven 1g slices are one card exactly: a ceiling of 1 holds them.
    seventh = gpus_per_unit(kind=MIG, name="nvidia.com/mig-1g.10gb", gpu_model="A100 80GB")
    assert (
        check_ceilings(
            ceilings=[CeilingFacts("team-c", D(1), Fraction(0))],
            changes=[_change("nvidia.com/mig-1g.10gb", 0, 7, gpus=seventh)],
        )
        == []
    )


def _change(resource, before, after, *, gpus=Fraction(1), teams=("team-c",), cluster="demo"):
    return CeilingChange(
        cluster=cluster,
        namespace="team-c-dev",
        resource=resource,
        teams=frozenset(teams),
        gpus_per_unit=gpus,
        cap_before=D(before),
        cap_after=D(after),
    )


GPU = "nvidia.com/gpu"


def test_a_change_raising_the_total_above_the_ceiling_is_an_error_on_what_raises_it():
    ceiling = CeilingFacts("team-c", D(6), Fraction(9, 2))  # 4.5 of 6 capped now
    assert check_ceilings(ceilings=[ceiling], changes=[_change(GPU, 4, 5)]) == []
    raise_, lower = _change(GPU, 4, 7), _change("other", 2, 1, cluster="cloud")
    [finding] = check_ceilings(ceilings=[ceiling], changes=[raise_, lower])
    assert (finding.level, finding.rule, finding.field) == (ERROR, RULE_TEAM_GPU_CEILING, "cap")
    assert (finding.cluster, finding.resource) == ("demo", GPU)
    assert "add up to 6.5 GPUs, above its ceiling of 6 (over by 0.5)" in finding.message
    # Lowered elsewhere in the same request, the rise fits.
    assert check_ceilings(ceilings=[ceiling], changes=[raise_, _change("x", 2, 0)]) == []


def test_a_total_already_over_blocks_only_a_change_that_raises_it():
    over = CeilingFacts("team-c", D(3), Fraction(5))  # 5 of 3 already
    [lower] = check_ceilings(ceilings=[over], changes=[_change(GPU, 4, 3)])
    assert lower.level == WARNING and "does not raise them" in lower.message
    [worse] = check_ceilings(ceilings=[over], changes=[_change(GPU, 4, 5)])
    assert worse.level == ERROR


def test_a_department_ceiling_counts_its_teams_and_other_teams_are_not_touched():
    department = CeilingFacts("research", D(10), Fraction(9), with_teams_under=True)
    [finding] = check_ceilings(
        ceilings=[department, CeilingFacts("team-b", D(1), Fraction(5))],
        changes=[_change(GPU, 4, 6, teams=("team-c", "research"))],
    )
    assert "team research and the teams under it" in finding.message
    # Resources that are not GPUs are not counted.
    assert check_ceilings(ceilings=[department], changes=[_change("cpu", 0, 99, gpus=None)]) == []


# --- through the database -------------------------------------------------------------------


@pytest.fixture
def slice_3g(db) -> Resource:
    return Resource.objects.create(
        name="nvidia.com/mig-3g.40gb",
        display_name="3g.40gb",
        kind=Resource.Kind.MIG,
        unit="slice",
        gpu_model="A100 80GB",
    )


@pytest.fixture
def cloud(db, gpu, slice_3g) -> Cluster:
    cloud = Cluster.objects.create(name="cloud", gpu_hour_price=D("2.50"))
    for resource in (gpu, slice_3g):
        ClusterCapacity.objects.create(cluster=cloud, resource=resource, capacity=D(16))
    ApprovalPolicy.objects.create(
        cluster=cloud, auto_approve_decreases=False, auto_approve_increase_max=0
    )
    return cloud


@pytest.fixture
def budgeted(plan, cloud, slice_3g, admin):
    """Team C: 2/4 GPUs on demo and 2/4 3g.40gb slices (2 GPUs at the caps) on cloud, under
    a ceiling of 7 over both."""
    team = plan["team-c"].team
    team.gpu_ceiling = D(7)
    team_save(team=team, acting_user=admin)
    cloud_ns = TeamNamespace.objects.create(team=team, cluster=cloud, name="team-c-cloud")
    allocation_set(
        team_namespace=cloud_ns, resource=slice_3g, guarantee=2, cap=4, acting_user=admin
    )
    return {"demo": plan["team-c"], "cloud": cloud_ns}


def _ask(lead, ns, resource, guarantee, cap, *, submit=True, **kwargs):
    return request_create(
        team=ns.team,
        acting_user=lead,
        justification="the evaluation runs of the release",
        lines=[LineInput(ns.pk, resource.pk, guarantee, cap)],
        submit=submit,
        **kwargs,
    )


@pytest.mark.django_db
def test_a_request_over_the_ceiling_is_refused_naming_the_rule_and_both_clusters_count(
    budgeted, lead_c, gpu, slice_3g, strict_policy
):
    # 4 + 2 = 6 now; cap 5 on demo makes 7 (fits), cap 6 makes 8.
    assert _ask(lead_c, budgeted["demo"], gpu, 2, 5).status == "submitted"
    with pytest.raises(ValidationFailed) as refused:
        _ask(lead_c, budgeted["demo"], gpu, 2, 6)
    assert refused.value.extra["field"] == "cap"
    [error] = refused.value.extra["errors"]
    assert error["rule"] == RULE_TEAM_GPU_CEILING and error["namespace"] == "team-c-dev"
    assert "add up to 8 GPUs, above its ceiling of 7 (over by 1)" in error["message"]
    # Two more 3g slices on cloud are one more GPU: 7, within.
    assert _ask(lead_c, budgeted["cloud"], slice_3g, 2, 6).status == "submitted"


@pytest.mark.django_db
def test_an_approved_temporary_grant_counts_until_it_ends(
    budgeted, lead_c, gpu, admin, strict_policy
):
    starts = timezone.now() + timedelta(days=1)
    grant = _ask(
        lead_c,
        budgeted["demo"],
        gpu,
        2,
        5,
        kind="temporary",
        starts_at=starts,
        ends_at=starts + timedelta(days=2),
    )
    request_approve(request=grant, acting_user=admin)
    with pytest.raises(ValidationFailed) as refused:
        _ask(lead_c, budgeted["cloud"], Resource.objects.get(kind="mig"), 2, 6)
    assert "add up to 8 GPUs" in refused.value.message


@pytest.mark.django_db
def test_an_admin_deciding_more_than_the_ceiling_allows_is_refused(
    budgeted, lead_c, gpu, admin, strict_policy
):
    request = _ask(lead_c, budgeted["demo"], gpu, 2, 5)
    line = request.lines.get()
    with pytest.raises(ValidationFailed) as refused:
        request_approve(
            request=request, acting_user=admin, decisions=[Decision(line.pk, D(2), D(6))]
        )
    assert refused.value.extra["errors"][0]["rule"] == RULE_TEAM_GPU_CEILING
    assert Allocation.objects.get(team_namespace=budgeted["demo"]).cap == 4


@pytest.mark.django_db
def test_requests_that_fit_alone_do_not_fit_together(budgeted, lead_c, gpu, slice_3g, admin):
    ApprovalPolicy.objects.update_or_create(
        cluster=budgeted["demo"].cluster,
        defaults={"auto_approve_decreases": False, "auto_approve_increase_max": 0},
    )
    first = _ask(lead_c, budgeted["demo"], gpu, 2, 5)
    second = _ask(lead_c, budgeted["cloud"], slice_3g, 2, 6)
    request_approve(request=first, acting_user=admin)
    with pytest.raises(ValidationFailed) as refused:
        request_approve(request=second, acting_user=admin)
    assert "add up to 8 GPUs" in refused.value.message
    second.refresh_from_db()
    assert second.status == "submitted"


@pytest.mark.django_db(transaction=True)
def test_two_admins_approving_on_two_clusters_at_once_keep_the_team_under_its_ceiling(
    budgeted, lead_c, gpu, slice_3g, admin, admin2, strict_policy
):
    """Each request fits alone (6 + 1 = 7), together they do not (8): without the team's row
    locked first, two approvals on two clusters lock different capacity rows and both pass."""
    for _ in range(3):
        on_demo = _ask(lead_c, budgeted["demo"], gpu, 2, 5)
        on_cloud = _ask(lead_c, budgeted["cloud"], slice_3g, 2, 6)
        outcomes = race(
            lambda r=on_demo: request_approve(request=r, acting_user=admin),
            lambda r=on_cloud: request_approve(request=r, acting_user=admin2),
        )
        assert sorted(outcomes) == ["ValidationFailed", "ok"], outcomes
        caps = {
            a.team_namespace.cluster.name: a.cap
            for a in Allocation.objects.filter(team_namespace__team__slug="team-c")
        }
        assert caps["demo"] + caps["cloud"] / 2 == 7
        # Back to 6 of 7 for the next round.
        allocation_set(
            team_namespace=budgeted["demo"], resource=gpu, guarantee=2, cap=4, acting_user=admin
        )
        allocation_set(
            team_namespace=budgeted["cloud"],
            resource=slice_3g,
            guarantee=2,
            cap=4,
            acting_user=admin,
        )


@pytest.mark.django_db(transaction=True)
def test_a_draft_committing_while_a_submit_holds_the_teams_budget_does_not_deadlock(
    budgeted, lead_c, gpu
):
    """A draft of the team, audited (the audit chain's head locked) but not committed yet,
    checks at COMMIT that its team still exists (a foreign key: KEY SHARE on the team's row);
    a submit of the same team meanwhile holds the team's budget and waits for the audit head.
    The budget lock must not block that check (FOR NO KEY UPDATE), or the two deadlock."""
    import threading

    from tests.support.locks import lock_waiters, require_postgresql
    from tests.support.waiting import poll

    require_postgresql("a deadlock of row locks needs PostgreSQL's")

    drafted, outcomes = threading.Event(), {}

    def draft():
        try:
            with transaction.atomic():
                _ask(lead_c, budgeted["demo"], gpu, 2, 3, submit=False)
                drafted.set()
                poll("the submit waiting on the draft", lambda: lock_waiters() > 0, 20, 0.05)
            outcomes["draft"] = "ok"
        except Exception as exc:
            outcomes["draft"] = f"crash: {exc}"
        finally:
            connection.close()

    def submit():
        try:
            drafted.wait(20)
            _ask(lead_c, budgeted["demo"], gpu, 2, 5)
            outcomes["submit"] = "ok"
        except Exception as exc:
            outcomes["submit"] = f"crash: {exc}"
        finally:
            connection.close()

    threads = [threading.Thread(target=draft), threading.Thread(target=submit)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert outcomes == {"draft": "ok", "submit": "ok"}, outcomes


@pytest.mark.django_db
def test_a_department_ceiling_bounds_the_teams_under_it(plan, lead_c, gpu, admin, strict_policy):
    research = team_save(
        team=Team(slug="research", name="Research", gpu_ceiling=D(5)), acting_user=admin
    )
    team_c = plan["team-c"].team
    team_c.parent = research
    team_save(team=team_c, acting_user=admin)
    sibling = team_save(team=Team(slug="team-d", name="Team D", parent=research), acting_user=admin)
    ns_d = TeamNamespace.objects.create(team=sibling, cluster=plan["team-c"].cluster, name="team-d")
    allocation_set(team_namespace=ns_d, resource=gpu, guarantee=0, cap=1, acting_user=admin)
    # Team C's cap 4 and team D's 1 fill the department's 5.
    with pytest.raises(ValidationFailed) as refused:
        _ask(lead_c, plan["team-c"], gpu, 2, 5)
    assert "team research and the teams under it" in refused.value.message
    assert "add up to 6 GPUs, above its ceiling of 5" in refused.value.message


@pytest.mark.django_db
def test_moving_a_namespace_or_a_team_keeps_the_ceilings_it_lands_under(budgeted, plan, admin):
    from quotas.teams import team_namespace_save

    team_a = plan["team-a"].team  # 10 GPUs at the caps on demo
    team_a.gpu_ceiling = D(12)
    team_save(team=team_a, acting_user=admin)
    cloud_ns = budgeted["cloud"]  # 4 half-card slices: 2 GPUs at the caps
    moved = TeamNamespace.objects.get(pk=cloud_ns.pk)
    moved.team = plan["team-b"].team  # no ceiling: moves
    team_namespace_save(team_namespace=moved, acting_user=admin)
    moved.team = team_a  # 10 + 2 = 12: just fits
    team_namespace_save(team_namespace=moved, acting_user=admin)
    demo_b = TeamNamespace.objects.get(pk=plan["team-b"].pk)  # 6 GPUs at the caps
    demo_b.team = team_a
    with pytest.raises(ValidationFailed) as refused:
        team_namespace_save(team_namespace=demo_b, acting_user=admin)
    assert refused.value.field == "team"
    assert refused.value.message == (
        "team: moving namespace team-b-inference would bring the caps of team team-a over all "
        "clusters to 18 GPUs, above its ceiling of 12 (over by 6): raise the ceiling first, or "
        "lower caps (rule team_gpu_ceiling)"
    )
    assert TeamNamespace.objects.get(pk=demo_b.pk).team.slug == "team-b"  # nothing changed
    # A team moved under a department brings its caps (and its teams') along.
    research = team_save(
        team=Team(slug="research", name="Research", gpu_ceiling=D(5)), acting_user=admin
    )
    team_b = Team.objects.get(slug="team-b")
    team_b.parent = research
    with pytest.raises(ValidationFailed) as refused:
        team_save(team=team_b, acting_user=admin)
    assert refused.value.field == "parent"
    assert "moving team team-b and the teams under it would bring the caps of team research" in (
        refused.value.message
    )
    assert Team.objects.get(slug="team-b").parent is None
    research.gpu_ceiling = D(6)
    team_save(team=research, acting_user=admin)
    team_save(team=team_b, acting_user=admin)  # 6 of 6
    # Inside the department nothing is counted twice: team C under team B moves freely as far
    # as research is concerned, but not past research's own ceiling.
    team_c = Team.objects.get(slug="team-c")
    team_c.parent = team_b
    with pytest.raises(ValidationFailed) as refused:
        team_save(team=team_c, acting_user=admin)
    assert "caps of team research" in refused.value.message  # 6 + team C's 4 + 0
    assert refused.value.message.count("team_gpu_ceiling") == 1


@pytest.mark.django_db
def test_an_admin_moving_a_namespace_over_a_ceiling_gets_the_reason_on_the_form(
    budgeted, plan, admin, client
):
    team_a = plan["team-a"].team
    team_a.gpu_ceiling = D(10)
    team_save(team=team_a, acting_user=admin)
    ns = budgeted["cloud"]
    client.force_login(admin)
    url = reverse("admin:quotas_teamnamespace_change", args=[ns.pk])
    form = client.get(url).context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None}
    data.update({"team": team_a.pk, "cluster": ns.cluster_id})
    response = client.post(url, data)
    assert response.status_code == 200
    assert "above its ceiling of 10 (over by 2)" in response.content.decode()
    assert TeamNamespace.objects.get(pk=ns.pk).team.slug == "team-c"
    # A team put under a department over its ceiling: the same, on the team's form.
    research = team_save(
        team=Team(slug="research", name="Research", gpu_ceiling=D(3)), acting_user=admin
    )
    team_c = ns.team
    url = reverse("admin:quotas_team_change", args=[team_c.pk])
    page = client.get(url)
    data = {k: v for k, v in page.context["adminform"].form.initial.items() if v is not None}
    for formset in page.context["inline_admin_formsets"]:
        management = formset.formset.management_form
        data.update({f"{management.prefix}-{k}": v for k, v in management.initial.items()})
        for i, form in enumerate(formset.formset.initial_forms):
            data.update(
                {
                    f"{formset.formset.prefix}-{i}-{k}": getattr(v, "pk", v)
                    for k, v in form.initial.items()
                    if v is not None
                }
            )
    data["parent"] = research.pk
    response = client.post(url, data)
    assert response.status_code == 200
    assert "caps of team research over all clusters to 6 GPUs, above its ceiling of 3" in (
        response.content.decode()
    )
    assert Team.objects.get(pk=team_c.pk).parent_id is None


@pytest.mark.django_db
def test_the_summary_shows_each_teams_total_ceiling_and_cost(
    budgeted, client, lead_c, admin, settings
):
    settings.QUOTA_CURRENCY = "EUR"
    client.force_login(admin)
    page = client.get(reverse("summary")).content.decode()
    row = page[page.index('data-testid="budget-team-c"') :]
    row = row[: row.index("</tr>")]
    # 2 GPUs + 2 slices of half a card guaranteed; 4 + 2 capped; cloud's price 2.50 per GPU-hour
    # (demo has none): 1 × 2.50 × 730 guaranteed, 2 × 2.50 × 730 at the caps.
    assert ">3</td>" in row and ">6</td>" in row
    assert "6 of 7 (86%)" in row
    assert "1,825.00 EUR" in row and "3,650.00 EUR" in row
    assert "and 4 GPUs on clusters without a price" in row
    # A lead sees the own team by name, the others only together.
    client.force_login(lead_c)
    page = client.get(reverse("summary")).content.decode()
    assert 'data-testid="budget-team-c"' in page and 'data-testid="budget-others"' in page
    assert 'data-testid="budget-team-a"' not in page


def _budget_cells(page: str, testid: str) -> tuple[str, str]:
    """A budgets row's class attribute and its ceiling cell's text, tags taken out."""
    at = page.index(f'data-testid="{testid}"')
    row = page[page.rindex("<tr", 0, at) : page.index("</tr>", at)]
    opening = row[: row.index(">")]
    css = opening.split('class="')[1].split('"')[0] if 'class="' in opening else ""
    cell = row.split(f'data-testid="{testid}-ceiling">')[1].split("</td>")[0]
    return css, re.sub(r"<[^>]+>", "", cell)


@pytest.mark.django_db
def test_the_summarys_ceiling_cells_say_over_with_the_teams_under_and_none(budgeted, client, admin):
    # Put over its ceiling by a change the rules did not see (a ceiling lowered in the
    # database): the page says so rather than hiding it.
    research = team_save(
        team=Team(slug="research", name="Research", gpu_ceiling=D(20)), acting_user=admin
    )
    Team.objects.filter(slug="team-c").update(gpu_ceiling=D(5), parent=research)
    client.force_login(admin)
    page = client.get(reverse("summary")).content.decode()
    assert _budget_cells(page, "budget-team-c") == ("over", "6 of 5 (120%) over the ceiling")
    assert _budget_cells(page, "budget-research") == (
        "",
        "6 of 20 (30%) with the teams under it",
    )
    assert _budget_cells(page, "budget-team-a") == ("", "none")
    assert _budget_cells(page, "budget-total") == ("total", "\u2013")


@pytest.mark.django_db
def test_the_cluster_pages_show_the_gpu_hour_price(budgeted, client, lead_c):
    client.force_login(lead_c)
    page = client.get("/clusters/").content.decode()
    prices = page.split('data-testid="gpu-hour-price">')[1:]
    assert [p[: p.index("<")] for p in prices] == ["2.50 USD per GPU-hour"]  # cloud only
    page = client.get("/clusters/demo/").content.decode()
    assert 'data-testid="gpu-hour-price"' not in page


@pytest.mark.django_db
def test_the_api_answers_the_same_figures_scoped_and_documents_them(budgeted, lead_c, admin):
    api = as_user(lead_c)
    answer = api.get("/api/v1/budgets/").json()
    assert answer["currency"] == "USD" and [t["team"] for t in answer["teams"]] == ["team-c"]
    [team_c] = answer["teams"]
    assert (team_c["gpus_capped"], team_c["gpu_ceiling"], team_c["ceiling_counts"]) == (
        "6",
        "7",
        "6",
    )
    assert team_c["capped_per_month"] == "3650.00" and team_c["gpus_unpriced"] == "4"
    assert answer["others"]["team"] is None and answer["others"]["gpus_capped"] == "16"
    assert as_user(admin).get("/api/v1/teams/team-c/").json()["gpu_ceiling"] == "7"
    assert as_user(admin).get("/api/v1/clusters/cloud/").json()["gpu_hour_price"] == "2.5"
    response = api.post("/api/v1/requests/", body("2", "6"), format="json")
    assert response.status_code == 400
    assert response.json()["extra"]["errors"][0]["rule"] == RULE_TEAM_GPU_CEILING
    schema = api.get("/api/schema/", {"format": "json"}).json()
    assert "/api/v1/budgets/" in schema["paths"]
    assert "gpu_ceiling" in schema["components"]["schemas"]["Team"]["properties"]
    assert "gpu_hour_price" in schema["components"]["schemas"]["Cluster"]["properties"]
    assert APIClient().get("/api/v1/budgets/").status_code == 401


@pytest.mark.django_db
def test_the_ceiling_and_the_price_are_audited_and_bad_values_refused(budgeted, cloud, admin):
    event = AuditEvent.objects.filter(action="team.changed").latest("seq")
    assert (event.before["gpu_ceiling"], event.after["gpu_ceiling"]) == (None, "7")
    cloud.gpu_hour_price = D("3")
    cluster_save(cluster=cloud, acting_user=admin)
    event = AuditEvent.objects.filter(action="cluster.changed").latest("seq")
    assert (event.before["gpu_hour_price"], event.after["gpu_hour_price"]) == ("2.5", "3")
    team = budgeted["demo"].team
    team.gpu_ceiling = D(-1)
    with pytest.raises(ValidationFailed) as refused:
        team_save(team=team, acting_user=admin)
    assert refused.value.extra["field"] == "gpu_ceiling"
    assert refused.value.message.startswith("gpu_ceiling: ")
    cloud.gpu_hour_price = D("-0.1")
    with pytest.raises(ValidationError):
        cloud.full_clean()
    with pytest.raises(IntegrityError), transaction.atomic():
        Team.objects.filter(pk=team.pk).update(gpu_ceiling=D(-1))


@pytest.mark.django_db
def test_a_lead_cannot_set_the_ceiling(budgeted, lead_c, client):
    """Only platform admins edit teams (the Django admin); the API's teams are read-only."""
    client.force_login(lead_c)
    team = budgeted["demo"].team
    assert client.get(reverse("admin:quotas_team_change", args=[team.pk])).status_code in (302, 403)
    response = as_user(lead_c).patch("/api/v1/teams/team-c/", {"gpu_ceiling": "99"}, format="json")
    assert response.status_code == 405
    team.refresh_from_db()
    assert team.gpu_ceiling == 7


def test_the_currency_must_be_an_iso_code(settings):
    settings.QUOTA_CURRENCY = "euro"
    assert "quotas.E011" in [m.id for m in run_checks()]
    settings.QUOTA_CURRENCY = "CNY"
    assert "quotas.E011" not in [m.id for m in run_checks()]


@pytest.mark.django_db
def test_the_readme_example_is_what_the_demo_answers():
    call_command("seed_demo")
    ns = TeamNamespace.objects.get(cluster__name="demo", name="team-c-dev")
    with pytest.raises(ValidationFailed) as refused:
        request_create(
            team=ns.team,
            acting_user=User.objects.get(username="lead-c"),
            justification="more evaluation at once",
            lines=[LineInput(ns.pk, Resource.objects.get(name=GPU).pk, 2, 6)],
            submit=True,
        )
    readme = " ".join(Path("README.md").read_text().split())
    assert f"`{refused.value.message}`" in readme
