"""The highest priority class used sparingly (rule top_priority_share): what namespaces allowed
the class of the highest value are guaranteed stays within a share of each resource's capacity
— on plain data, then through requests, the API, the cluster page and the settings check."""

from decimal import Decimal as D
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.checks import run_checks
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.urls import reverse

from approvals.lifecycle import request_create
from approvals.lines import LineInput
from common.errors import ValidationFailed
from quotas.clusters import cluster_save
from quotas.models import AuditEvent, Cluster, PriorityClass, Resource, TeamNamespace
from quotas.rules import (
    ERROR,
    RULE_TOP_PRIORITY_SHARE,
    WARNING,
    AllocationFacts,
    ClusterFacts,
    PlanChange,
    check_change,
    check_plan,
)
from quotas.services import allocation_set
from tests.support.api import as_user, body

GPU = "nvidia.com/gpu"
TOP = "production-inference"


def facts(share: str | None = "0.3", classes=(TOP,)) -> ClusterFacts:
    return ClusterFacts(
        name="demo",
        capacities={GPU: D(16)},
        max_cap_share=D("0.5"),
        top_priority_share=None if share is None else D(share),
        top_priority_classes=frozenset(classes),
    )


def alloc(namespace, guarantee, cap, classes=(), held=0) -> AllocationFacts:
    return AllocationFacts(
        "demo",
        namespace,
        GPU,
        D(guarantee),
        D(cap),
        priority_classes=frozenset(classes),
        held=D(held),
    )


PLAN = [alloc("team-b-inference", 4, 6, [TOP]), alloc("team-a-training", 6, 8, ["training"])]


def _top(findings):
    return [f for f in findings if f.rule == RULE_TOP_PRIORITY_SHARE]


def _change(current, guarantee, cap, classes=None, cluster=None):
    return _top(
        check_change(
            cluster=cluster or facts(),
            allocations=PLAN,
            changes=[
                PlanChange(
                    "demo",
                    current.namespace,
                    GPU,
                    D(guarantee),
                    D(cap),
                    current=current,
                    priority_classes=None if classes is None else frozenset(classes),
                )
            ],
        )
    )


def test_a_rise_above_the_share_is_an_error_naming_the_class_and_the_limit():
    # 30% of 16 is 4.8: team B at 4 is within, at 5 it is not.
    assert _change(PLAN[0], 4, 6) == []
    [finding] = _change(PLAN[0], 5, 6)
    assert finding.level == ERROR and finding.field == "priority_classes"
    assert finding.namespace == "" and finding.resource == GPU
    assert "(production-inference)" in finding.message
    assert "5 nvidia.com/gpu, above 30% of its capacity 16 (max 4.8)" in finding.message


def test_allowing_the_highest_class_counts_the_guarantee_already_held():
    # Team A keeps its 6 but may now use production-inference: 4 + 6 = 10 > 4.8.
    [finding] = _change(PLAN[1], 6, 8, classes=["training", TOP])
    assert finding.level == ERROR and "10 nvidia.com/gpu" in finding.message
    # Taking the class away from team B leaves nothing at the top.
    assert _change(PLAN[0], 4, 6, classes=["training"]) == []
    # Other classes do not count, whatever the guarantee.
    assert _change(PLAN[1], 7, 8) == []


def test_a_plan_already_over_blocks_only_changes_that_raise_it():
    over = facts("0.2")  # 3.2: team B's 4 is over already
    [lower] = _change(PLAN[0], 3.5, 6, cluster=over)
    assert lower.level == WARNING and "not blocking" in lower.message
    [keep] = _change(PLAN[1], 7, 8, cluster=over)  # team A's change does not touch the sum
    assert keep.level == WARNING
    [worse] = _change(PLAN[0], 5, 6, cluster=over)
    assert worse.level == ERROR


def test_the_plan_reports_the_share_with_what_is_over_and_grants_count():
    [finding] = _top(check_plan(cluster=facts("0.2"), allocations=PLAN))
    assert finding.level == ERROR and "over by 0.8" in finding.message
    # Guarantee a temporary grant holds on top of the allocation counts as guaranteed.
    held = [alloc("team-b-inference", 4, 6, [TOP], held=1), PLAN[1]]
    assert _top(check_plan(cluster=facts("0.3"), allocations=held))
    assert not _top(check_plan(cluster=facts("0.3"), allocations=PLAN))


def test_no_limit_or_no_class_checks_nothing():
    assert _change(PLAN[0], 8, 8, cluster=facts(None)) == []
    assert _change(PLAN[0], 8, 8, cluster=facts("0.3", classes=())) == []


# --- through the database -------------------------------------------------------------------


@pytest.fixture
def classes(db):
    for name, value in ((TOP, 100000), ("training", 10000)):
        PriorityClass.objects.create(name=name, value=value)


@pytest.fixture
def limited(plan, cluster, classes, admin, gpu):
    """The seed's plan on a cluster that lets at most 30% be guaranteed at the top class;
    team B (4 of 16) may use it."""
    cluster.top_priority_share = D("0.3")
    cluster_save(cluster=cluster, acting_user=admin)
    allocation_set(
        team_namespace=plan["team-b"],
        resource=gpu,
        guarantee=4,
        cap=6,
        priority_classes=[TOP],
        acting_user=admin,
    )
    return cluster


@pytest.mark.django_db
def test_a_request_giving_the_top_class_to_more_is_refused_with_the_rule(
    limited, plan, gpu, lead_c
):
    line = LineInput(plan["team-c"].pk, gpu.pk, 2, 4, priority_classes=(TOP,))
    with pytest.raises(ValidationFailed) as refused:
        request_create(
            team=plan["team-c"].team,
            acting_user=lead_c,
            justification="serve the new model",
            lines=[line],
            submit=True,
        )
    errors = refused.value.extra["errors"]
    assert [e["rule"] for e in errors] == [RULE_TOP_PRIORITY_SHARE]
    assert "6 nvidia.com/gpu, above 30%" in errors[0]["message"]
    # The same request with the lower class passes the rule.
    request_create(
        team=plan["team-c"].team,
        acting_user=lead_c,
        justification="serve the new model",
        lines=[LineInput(plan["team-c"].pk, gpu.pk, 2, 4, priority_classes=("training",))],
        submit=True,
    )


@pytest.mark.django_db
def test_the_api_shows_the_share_and_refuses_with_the_rule(limited, lead_c, admin):
    cluster = as_user(admin).get("/api/v1/clusters/demo/").json()
    assert cluster["top_priority_share"] == "0.3"
    api = as_user(lead_c)
    response = api.post("/api/v1/requests/", body("2", "4", priority_classes=[TOP]), format="json")
    assert response.status_code == 400
    error = response.json()
    assert error["extra"]["field"] == "priority_classes"
    assert error["extra"]["errors"][0]["rule"] == RULE_TOP_PRIORITY_SHARE
    schema = api.get("/api/schema/", {"format": "json"}).json()
    assert "top_priority_share" in schema["components"]["schemas"]["Cluster"]["properties"]


@pytest.mark.django_db
def test_the_cluster_page_shows_the_use_against_the_limit(limited, client, lead_c, admin, gpu):
    client.force_login(lead_c)
    page = client.get(reverse("cluster-detail", args=["demo"])).content.decode()
    assert 'data-testid="top-priority-demo"' in page
    assert (
        "4 of 16 guaranteed to namespaces allowed production-inference (25%; at most 30%, 4.8)"
        in page
    )
    # Lowered below what is held: the line turns into an error and the violation is listed.
    limited.top_priority_share = D("0.2")
    cluster_save(cluster=limited, acting_user=admin)
    page = client.get(reverse("cluster-detail", args=["demo"])).content.decode()
    assert '<li class="error">nvidia.com/gpu: 4 of 16' in page
    assert "over by 0.8" in page


@pytest.mark.django_db
def test_the_share_is_audited_and_bad_values_are_refused(limited, admin):
    event = AuditEvent.objects.filter(action="cluster.changed").latest("id")
    assert event.before["top_priority_share"] is None
    assert event.after["top_priority_share"] == "0.3"
    limited.top_priority_share = D("1.5")
    with pytest.raises(ValidationError) as bad:
        limited.full_clean()
    assert "top_priority_share" in bad.value.message_dict
    with pytest.raises(IntegrityError), transaction.atomic():
        Cluster.objects.filter(pk=limited.pk).update(top_priority_share=D(0))


def test_the_portal_default_must_be_a_share(settings):
    settings.QUOTA_DEFAULT_TOP_PRIORITY_SHARE = 1.5
    assert "quotas.E010" in [m.id for m in run_checks()]
    settings.QUOTA_DEFAULT_TOP_PRIORITY_SHARE = None
    assert "quotas.E010" not in [m.id for m in run_checks()]


@pytest.mark.django_db
def test_the_portal_default_applies_to_clusters_without_their_own(settings, cluster):
    assert cluster.effective_top_priority_share is None
    settings.QUOTA_DEFAULT_TOP_PRIORITY_SHARE = 0.25
    assert cluster.effective_top_priority_share == D("0.25")
    cluster.top_priority_share = D("0.5")
    assert cluster.effective_top_priority_share == D("0.5")


@pytest.mark.django_db
def test_the_readme_example_is_what_the_demo_answers():
    call_command("seed_demo")
    ns = TeamNamespace.objects.get(cluster__name="demo", name="team-b-inference")
    gpu = Resource.objects.get(name=GPU)
    with pytest.raises(ValidationFailed) as refused:
        request_create(
            team=ns.team,
            acting_user=User.objects.get(username="lead-b"),
            justification="a second model online",
            lines=[LineInput(ns.pk, gpu.pk, 8, 8)],
            submit=True,
        )
    readme = " ".join(Path("README.md").read_text().split())
    assert f"e.g. `{refused.value.message}`" in readme
