"""Maximum run times: set and removed by platform admins only (service, admin, API), audited,
synced to the namespace's cluster, refused with the field and the rule when wrong, shown to
the team on its dashboard and in the API; what they become on the cluster."""

from __future__ import annotations

import pytest
from django.urls import reverse

from common.amounts import format_duration
from common.errors import ValidationFailed
from quotas.kube.plan import cluster_plan
from quotas.kube.render import MAX_RUN_TIME_POLICY_NAME, render_cluster
from quotas.models import AuditEvent, PriorityClass, RunTimeLimit, SyncRequest
from quotas.services import (
    allocation_set,
    priority_class_delete,
    priority_class_delete_problems,
    run_time_limit_delete,
    run_time_limit_set,
)
from tests.support.api import as_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def experiment(db) -> PriorityClass:
    return PriorityClass.objects.create(name="experiment", value=1000, preempts=False)


@pytest.fixture
def limit(ns_a, alloc_a, experiment, admin) -> RunTimeLimit:
    return run_time_limit_set(
        team_namespace=ns_a, priority_class=experiment, max_seconds=86400, acting_user=admin
    )


def test_setting_changing_and_removing_is_audited_and_synced(limit, ns_a, experiment, admin):
    event = AuditEvent.objects.filter(action="run_time_limit.set").latest("id")
    assert event.before is None
    assert event.after == {
        "cluster": "demo",
        "namespace": "team-a-training",
        "priority_class": "experiment",
        "max_seconds": 86400,
    }
    assert event.actor == admin
    sync = SyncRequest.objects.latest("id")
    assert sync.namespaces == ["team-a-training"]
    assert "maximum run time of experiment" in sync.reason

    count = AuditEvent.objects.count()
    run_time_limit_set(
        team_namespace=ns_a, priority_class=experiment, max_seconds="86400", acting_user=admin
    )
    assert AuditEvent.objects.count() == count  # nothing changed, nothing recorded

    run_time_limit_set(
        team_namespace=ns_a, priority_class=experiment, max_seconds=3600, acting_user=admin
    )
    event = AuditEvent.objects.latest("id")
    assert (event.before["max_seconds"], event.after["max_seconds"]) == (86400, 3600)
    assert RunTimeLimit.objects.get().max_seconds == 3600

    run_time_limit_delete(limit=RunTimeLimit.objects.get(), acting_user=admin)
    event = AuditEvent.objects.latest("id")
    assert event.action == "run_time_limit.deleted"
    assert event.before["max_seconds"] == 3600 and event.after is None
    assert not RunTimeLimit.objects.exists()


@pytest.mark.parametrize("bad", [0, -5, 2**31, "abc", "1.5", None, True])
def test_a_bad_number_of_seconds_is_refused_naming_the_field(ns_a, experiment, admin, bad):
    with pytest.raises(ValidationFailed) as refused:
        run_time_limit_set(
            team_namespace=ns_a, priority_class=experiment, max_seconds=bad, acting_user=admin
        )
    assert refused.value.field == "max_seconds"
    assert "whole number of seconds from 1 to 2147483647" in refused.value.message
    assert not RunTimeLimit.objects.exists()


def test_a_class_the_namespace_does_not_allow_or_too_long_a_name_is_refused(
    ns_a, gpu, experiment, admin
):
    PriorityClass.objects.create(name="training", value=500)
    allocation_set(
        team_namespace=ns_a,
        resource=gpu,
        guarantee=2,
        cap=4,
        priority_classes=["training"],
        acting_user=admin,
    )
    with pytest.raises(ValidationFailed) as refused:
        run_time_limit_set(
            team_namespace=ns_a, priority_class=experiment, max_seconds=60, acting_user=admin
        )
    assert refused.value.field == "priority_class"
    assert "experiment is not allowed in namespace team-a-training (allowed: training)" in (
        refused.value.message
    )
    long_name = PriorityClass.objects.create(name="x" * 51, value=1)
    with pytest.raises(ValidationFailed) as refused:
        run_time_limit_set(
            team_namespace=ns_a, priority_class=long_name, max_seconds=60, acting_user=admin
        )
    assert "at most 50 characters" in refused.value.message


def test_a_class_with_a_maximum_run_time_cannot_be_removed(limit, experiment, admin):
    problems = priority_class_delete_problems(priority_class=experiment)
    assert problems == [
        "priority class experiment has a maximum run time in 1 namespace(s): "
        "team-a-training (demo); remove those first"
    ]
    with pytest.raises(ValidationFailed):
        priority_class_delete(priority_class=experiment, acting_user=admin)
    assert PriorityClass.objects.filter(name="experiment").exists()


def test_the_plan_renders_the_annotation_and_the_policy_for_the_whole_and_part_of_a_cluster(
    limit, cluster, ns_b, alloc_b
):
    def rendered(plan):
        objects = render_cluster(plan)
        namespaces = {
            o["metadata"]["name"]: o["metadata"].get("annotations", {})
            for o in objects
            if o["kind"] == "Namespace"
        }
        policies = {
            o["metadata"]["name"] for o in objects if o["kind"] == "ValidatingAdmissionPolicy"
        }
        return namespaces, policies

    namespaces, policies = rendered(cluster_plan(cluster))
    assert namespaces["team-a-training"]["quota-portal/max-run-time.experiment"] == "86400"
    assert not any(
        k.startswith("quota-portal/max-run-time.") for k in namespaces["team-b-inference"]
    )
    assert MAX_RUN_TIME_POLICY_NAME in policies
    # A sync of team B's namespace alone keeps the cluster's policy: the totals say a maximum
    # exists elsewhere.
    namespaces, policies = rendered(cluster_plan(cluster, namespaces=["team-b-inference"]))
    assert set(namespaces) == {"team-b-inference"}
    assert MAX_RUN_TIME_POLICY_NAME in policies
    RunTimeLimit.objects.all().delete()
    assert MAX_RUN_TIME_POLICY_NAME not in rendered(cluster_plan(cluster))[1]


def test_the_api_lists_what_you_may_see_and_only_admins_change_it(
    limit, lead_a, other_team_lead, auditor, admin, ns_b, experiment
):
    url = "/api/v1/run-time-limits/"
    mine = as_user(lead_a).get(url).json()["results"]
    assert [(r["namespace"], r["priority_class"], r["max_seconds"]) for r in mine] == [
        ("team-a-training", "experiment", 86400)
    ]
    assert as_user(other_team_lead).get(url).json()["results"] == []
    hidden = as_user(lead_a).get(url, {"team": "team-b"})
    assert hidden.status_code == 400 and hidden.json()["extra"]["field"] == "team"
    assert as_user(admin).get(url, {"cluster": "demo", "team": "team-b"}).json()["count"] == 0
    assert len(as_user(auditor).get(url).json()["results"]) == 1
    namespaces = as_user(lead_a).get("/api/v1/namespaces/").json()["results"]
    assert namespaces[0]["max_run_times"] == [
        {"priority_class": "experiment", "max_seconds": 86400}
    ]

    body = {"cluster": "demo", "namespace": "team-b-inference", "priority_class": "experiment"}
    for user in (lead_a, other_team_lead, auditor):
        response = as_user(user).put(url, {**body, "max_seconds": 60}, format="json")
        assert response.status_code == 403, response.content
        delete = as_user(user).delete(f"{url}{limit.pk}/")
        assert delete.status_code in (403, 404), delete.content
    assert RunTimeLimit.objects.count() == 1

    api = as_user(admin)
    created = api.put(url, {**body, "max_seconds": 60}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["max_seconds"] == 60
    changed = api.put(url, {**body, "max_seconds": 120}, format="json")
    assert changed.status_code == 200 and changed.json()["max_seconds"] == 120
    bad = api.put(url, {**body, "max_seconds": 0}, format="json")
    assert bad.status_code == 400 and "max_seconds" in bad.content.decode()
    unknown = api.put(url, {**body, "priority_class": "nope", "max_seconds": 5}, format="json")
    assert unknown.status_code == 400
    assert "priority_class: no priority class named nope" in unknown.content.decode()
    missing = api.put(url, {**body, "namespace": "nope", "max_seconds": 5}, format="json")
    assert missing.status_code == 400 and "namespace" in missing.content.decode()
    gone = api.delete(f"{url}{created.json()['id']}/")
    assert gone.status_code == 204
    assert list(RunTimeLimit.objects.values_list("team_namespace__name", flat=True)) == [
        "team-a-training"
    ]
    schema = api.get("/api/schema/", {"format": "json"}).json()
    assert "max_run_times" in schema["components"]["schemas"]["Namespace"]["properties"]
    assert "put" in schema["paths"]["/api/v1/run-time-limits/"]


def test_the_admin_sets_it_through_the_service_and_shows_refusals(
    limit, ns_a, experiment, client, admin
):
    client.force_login(admin)
    change = reverse("admin:quotas_runtimelimit_change", args=[limit.pk])
    response = client.post(change, {"max_seconds": "0"})
    assert response.status_code == 200
    assert "whole number of seconds from 1 to 2147483647" in response.content.decode()
    response = client.post(change, {"max_seconds": "7200"})
    assert response.status_code == 302
    event = AuditEvent.objects.latest("id")
    assert event.action == "run_time_limit.set" and event.after["max_seconds"] == 7200


def test_the_team_sees_its_maximum_run_times_on_the_dashboard(
    limit, ns_a, ns_b, alloc_b, admin, client, lead_a
):
    batch = PriorityClass.objects.create(name="batch", value=500, preempts=False)
    run_time_limit_set(team_namespace=ns_a, priority_class=batch, max_seconds=45, acting_user=admin)
    run_time_limit_set(team_namespace=ns_b, priority_class=batch, max_seconds=60, acting_user=admin)
    client.force_login(lead_a)
    page = client.get(reverse("home")).content.decode()
    assert 'data-testid="run-times-team-a"' in page
    # By cluster, namespace and priority class; another team's are not shown.
    first = page.index("batch in team-a-training on demo: at most 45 s (45 s)")
    assert first < page.index("experiment in team-a-training on demo: at most 1 d (86400 s)")
    assert "team-b-inference" not in page


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(86400, "1 d"), (5400, "1 h 30 min"), (90061, "1 d 1 h"), (45, "45 s"), (0, "0 s")],
)
def test_durations_are_written_in_their_two_largest_units(seconds, text):
    assert format_duration(seconds) == text
