"""The Django admin is no side door: allocations are read-only there, and capacity, approval
policy and priority class edits go through the services (checked, audited, synced).

Everything is driven through the Django test client, as an admin would: POSTs to the admin's
change, add and delete views and to the changelist's actions.
"""

import pytest
from django.forms.models import model_to_dict

from approvals.models import ApprovalPolicy
from common.errors import ValidationFailed
from quotas.models import (
    Allocation,
    AllocationVersion,
    AuditEvent,
    Cluster,
    ClusterCapacity,
    PriorityClass,
    SyncRequest,
)
from quotas.services import (
    allocation_set,
    cluster_capacity_delete,
    priority_class_delete,
    priority_class_save,
)

pytestmark = pytest.mark.django_db


def form_data(instance, fields) -> dict:
    """POST data of an admin form holding the instance's values (checkboxes: on or absent)."""
    data = {}
    for name, value in model_to_dict(instance, fields=fields).items():
        if value is True:
            data[name] = "on"
        elif value is False:
            continue
        else:
            data[name] = "" if value is None else str(value)
    return data


@pytest.fixture
def admin_client(client, admin):
    client.force_login(admin)
    return client


# --- allocations: read-only, never deleted here ---------------------------------------------


def test_an_allocation_cannot_be_edited_in_the_admin(admin_client, alloc_a):
    response = admin_client.post(
        f"/admin/quotas/allocation/{alloc_a.pk}/change/",
        {
            "team_namespace": alloc_a.team_namespace_id,
            "resource": alloc_a.resource_id,
            "guarantee": "6",
            "cap": "40",  # on a 16-GPU cluster: what the side door let through
            "priority_classes": "[]",
        },
    )
    assert response.status_code == 403
    alloc_a.refresh_from_db()
    assert (alloc_a.cap, alloc_a.version) == (10, 1)
    assert admin_client.get("/admin/quotas/allocation/add/").status_code == 403
    page = admin_client.get(f"/admin/quotas/allocation/{alloc_a.pk}/change/")
    assert page.status_code == 200  # still visible, read-only


def test_allocations_are_not_deleted_one_by_one_or_selected(admin_client, alloc_a, alloc_b):
    response = admin_client.post(f"/admin/quotas/allocation/{alloc_a.pk}/delete/", {"post": "yes"})
    assert response.status_code == 403
    admin_client.post(
        "/admin/quotas/allocation/",
        {"action": "delete_selected", "_selected_action": [alloc_a.pk, alloc_b.pk], "post": "yes"},
    )
    assert Allocation.objects.count() == 2
    assert AllocationVersion.objects.count() == 2


def test_deleting_a_namespace_would_take_its_allocations_and_is_refused(
    admin_client, alloc_a, ns_a
):
    response = admin_client.post(f"/admin/quotas/teamnamespace/{ns_a.pk}/delete/", {"post": "yes"})
    assert response.status_code == 403
    admin_client.post(
        "/admin/quotas/teamnamespace/",
        {"action": "delete_selected", "_selected_action": [ns_a.pk], "post": "yes"},
    )
    assert Allocation.objects.filter(pk=alloc_a.pk).exists()
    assert AllocationVersion.objects.filter(allocation=alloc_a).count() == 1


def test_the_inline_of_a_namespace_neither_edits_nor_deletes_allocations(
    admin_client, alloc_a, ns_a
):
    data = {
        **form_data(ns_a, ["name", "team", "cluster", "workload_class"]),
        "allocations-TOTAL_FORMS": "1",
        "allocations-INITIAL_FORMS": "1",
        "allocations-MIN_NUM_FORMS": "0",
        "allocations-MAX_NUM_FORMS": "1000",
        "allocations-0-id": str(alloc_a.pk),
        "allocations-0-team_namespace": str(ns_a.pk),
        "allocations-0-resource": str(alloc_a.resource_id),
        "allocations-0-guarantee": "6",
        "allocations-0-cap": "40",
        "allocations-0-priority_classes": "[]",
        "allocations-0-DELETE": "on",
    }
    admin_client.post(f"/admin/quotas/teamnamespace/{ns_a.pk}/change/", data)
    alloc_a.refresh_from_db()
    assert (alloc_a.cap, alloc_a.version) == (10, 1)


# --- capacities --------------------------------------------------------------------------------


def test_capacity_below_the_guarantees_is_refused_on_its_field(admin_client, alloc_a, alloc_b):
    capacity = ClusterCapacity.objects.get()
    response = admin_client.post(
        f"/admin/quotas/clustercapacity/{capacity.pk}/change/", {"capacity": "9"}
    )
    assert response.status_code == 200  # the form again
    assert "capacity 9 is below the 10 nvidia.com/gpu guaranteed on demo" in (
        response.content.decode()
    )
    capacity.refresh_from_db()
    assert capacity.capacity == 16
    assert not AuditEvent.objects.filter(action="capacity.changed").exists()


@pytest.mark.parametrize("typed", ["2_4", "\u0662\u0664", "2.4e1"])
def test_a_capacity_that_is_not_plain_digits_is_refused_on_its_field(admin_client, alloc_a, typed):
    capacity = ClusterCapacity.objects.get()
    response = admin_client.post(
        f"/admin/quotas/clustercapacity/{capacity.pk}/change/", {"capacity": typed}
    )
    assert response.status_code == 200  # the form again
    assert "give an amount as plain digits" in response.content.decode()
    capacity.refresh_from_db()
    assert capacity.capacity == 16
    assert not AuditEvent.objects.filter(action="capacity.changed").exists()


def test_capacity_edit_is_audited_and_synced(admin_client, admin, alloc_a):
    capacity = ClusterCapacity.objects.get()
    response = admin_client.post(
        f"/admin/quotas/clustercapacity/{capacity.pk}/change/", {"capacity": "24"}
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    capacity.refresh_from_db()
    assert capacity.capacity == 24
    event = AuditEvent.objects.get(action="capacity.changed")
    assert (event.actor, event.before, event.after["capacity"]) == (admin, {"capacity": "16"}, "24")
    assert SyncRequest.objects.filter(cluster=capacity.cluster).count() == 1


def test_capacity_added_in_the_admin_is_audited(admin_client, cluster):
    from quotas.models import Resource

    mig = Resource.objects.create(name="nvidia.com/mig-1g.10gb", display_name="1g.10gb")
    response = admin_client.post(
        "/admin/quotas/clustercapacity/add/",
        {"cluster": cluster.pk, "resource": mig.pk, "capacity": "14"},
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    assert ClusterCapacity.objects.get(resource=mig).capacity == 14
    event = AuditEvent.objects.get(action="capacity.changed")
    assert event.before is None and event.after["resource"] == "nvidia.com/mig-1g.10gb"


def test_the_cluster_page_shows_capacities_without_editing_them(admin_client, cluster):
    page = admin_client.get(f"/admin/quotas/cluster/{cluster.pk}/change/").content.decode()
    assert "change them under Cluster capacities" in page
    assert 'name="capacities-0-capacity"' not in page


# --- approval policies ------------------------------------------------------------------------


def test_approval_policy_add_and_edit_are_audited(admin_client, admin, cluster):
    fields = [f.name for f in ApprovalPolicy._meta.concrete_fields if not f.primary_key]
    data = form_data(ApprovalPolicy(cluster=cluster), fields)
    response = admin_client.post("/admin/approvals/approvalpolicy/add/", data)
    assert response.status_code == 302, response.content.decode()[:3000]
    policy = ApprovalPolicy.objects.get()
    created = AuditEvent.objects.get(action="approval_policy.changed")
    assert created.actor == admin and created.before is None

    data = {**form_data(policy, fields), "two_admins_above": "2"}
    response = admin_client.post(f"/admin/approvals/approvalpolicy/{policy.pk}/change/", data)
    assert response.status_code == 302, response.content.decode()[:3000]
    changed = AuditEvent.objects.filter(action="approval_policy.changed").latest("seq")
    assert (changed.before["two_admins_above"], changed.after["two_admins_above"]) == ("4", "2")
    assert (
        admin_client.post(
            f"/admin/approvals/approvalpolicy/{policy.pk}/delete/", {"post": "yes"}
        ).status_code
        == 403
    )


# --- priority classes -------------------------------------------------------------------------


def test_priority_class_creation_is_audited_and_syncs_every_cluster(admin_client, admin, cluster):
    other = Cluster.objects.create(name="other")
    response = admin_client.post(
        "/admin/quotas/priorityclass/add/",
        {"name": "production-inference", "value": "100000", "preempts": "on"},
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    event = AuditEvent.objects.get(action="priority_class.created")
    assert event.after == {
        "name": "production-inference",
        "value": 100000,
        "preempts": True,
        "description": "",
    }
    assert set(SyncRequest.objects.values_list("cluster", flat=True)) == {cluster.pk, other.pk}


def test_priority_class_value_and_preemption_are_read_only_after_creation(
    admin_client, admin, cluster
):
    pc = priority_class_save(
        priority_class=PriorityClass(name="experiment", value=1000, preempts=False),
        acting_user=admin,
    )
    syncs = SyncRequest.objects.count()
    response = admin_client.post(
        f"/admin/quotas/priorityclass/{pc.pk}/change/",
        {"value": "999999", "preempts": "on", "description": "low priority experiments"},
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    pc.refresh_from_db()
    assert (pc.value, pc.preempts, pc.description) == (1000, False, "low priority experiments")
    event = AuditEvent.objects.get(action="priority_class.changed")
    assert (event.before["description"], event.after["description"]) == (
        "",
        "low priority experiments",
    )
    assert SyncRequest.objects.count() == syncs + 1
    page = admin_client.get(f"/admin/quotas/priorityclass/{pc.pk}/change/").content.decode()
    assert 'name="value"' not in page and 'name="preempts"' not in page


@pytest.mark.parametrize(("field", "value"), [("value", 2000), ("preempts", True)])
def test_the_service_refuses_a_change_of_an_immutable_field(admin, field, value):
    pc = priority_class_save(
        priority_class=PriorityClass(name="experiment", value=1000, preempts=False),
        acting_user=admin,
    )
    setattr(pc, field, value)
    with pytest.raises(ValidationFailed) as err:
        priority_class_save(priority_class=pc, acting_user=admin)
    assert err.value.field == field
    assert "immutable in Kubernetes" in err.value.message
    stored = PriorityClass.objects.get(pk=pc.pk)
    assert (stored.value, stored.preempts) == (1000, False)


# --- deleting priority classes and capacities: through the services, refused while used ------


def messages_of(response) -> list[str]:
    return [str(m) for m in response.wsgi_request._messages]


@pytest.fixture
def experiment(admin):
    return priority_class_save(
        priority_class=PriorityClass(name="experiment", value=1000), acting_user=admin
    )


def test_a_priority_class_an_allocation_allows_is_not_deleted(
    admin_client, admin, experiment, ns_a, gpu
):
    allocation_set(
        team_namespace=ns_a,
        resource=gpu,
        guarantee=1,
        cap=2,
        priority_classes=["experiment"],
        acting_user=admin,
    )
    url = f"/admin/quotas/priorityclass/{experiment.pk}/delete/"
    for response in (admin_client.get(url), admin_client.post(url, {"post": "yes"})):
        assert response.status_code == 302
        assert response["Location"].endswith(f"/priorityclass/{experiment.pk}/change/")
        assert messages_of(response)[-1] == (
            "priority class experiment is allowed by 1 allocation(s): team-a-training "
            "nvidia.com/gpu (demo); change them by request first"
        )
    assert PriorityClass.objects.filter(pk=experiment.pk).exists()
    assert not AuditEvent.objects.filter(action="priority_class.deleted").exists()
    with pytest.raises(ValidationFailed) as err:
        priority_class_delete(priority_class=experiment, acting_user=admin)
    assert err.value.field == "name"


def test_a_viewer_deleting_an_object_in_use_is_refused_as_a_viewer(
    client, auditor, admin, experiment, ns_a, gpu
):
    # The business refusal ("allowed by 1 allocation") would tell a viewer what is in use and
    # suggest that, but for it, they could delete: the permission is checked first.
    allocation_set(
        team_namespace=ns_a,
        resource=gpu,
        guarantee=1,
        cap=2,
        priority_classes=["experiment"],
        acting_user=admin,
    )
    client.force_login(auditor)
    capacity = ClusterCapacity.objects.get()
    for url in (
        f"/admin/quotas/priorityclass/{experiment.pk}/delete/",
        f"/admin/quotas/clustercapacity/{capacity.pk}/delete/",
    ):
        for response in (client.get(url), client.post(url, {"post": "yes"})):
            assert response.status_code == 403, url
            assert messages_of(response) == []
    assert PriorityClass.objects.filter(pk=experiment.pk).exists()
    assert ClusterCapacity.objects.filter(pk=capacity.pk).exists()


def test_an_unused_priority_class_is_deleted_audited_and_synced(
    admin_client, admin, experiment, cluster
):
    SyncRequest.objects.all().delete()
    url = f"/admin/quotas/priorityclass/{experiment.pk}/delete/"
    assert "Are you sure" in admin_client.get(url).content.decode()
    response = admin_client.post(url, {"post": "yes"})
    assert response.status_code == 302
    assert not PriorityClass.objects.filter(name="experiment").exists()
    event = AuditEvent.objects.get(action="priority_class.deleted")
    assert (event.actor, event.before["name"], event.after) == (admin, "experiment", None)
    assert event.target_id == str(experiment.pk)
    assert SyncRequest.objects.filter(cluster=cluster).count() == 1


def test_no_bulk_delete_of_priority_classes_or_capacities(admin_client, experiment, cluster):
    for model in ("priorityclass", "clustercapacity"):
        page = admin_client.get(f"/admin/quotas/{model}/").content.decode()
        assert "delete_selected" not in page
    response = admin_client.post(
        "/admin/quotas/priorityclass/",
        {"action": "delete_selected", "_selected_action": [experiment.pk], "post": "yes"},
    )
    assert PriorityClass.objects.filter(pk=experiment.pk).exists(), response.status_code


def test_a_capacity_with_allocations_of_its_resource_is_not_deleted(admin_client, admin, alloc_a):
    capacity = ClusterCapacity.objects.get()
    response = admin_client.post(
        f"/admin/quotas/clustercapacity/{capacity.pk}/delete/", {"post": "yes"}
    )
    assert response.status_code == 302
    assert messages_of(response) == [
        "1 allocation(s) of nvidia.com/gpu exist on demo (team-a-training): a resource leaves "
        "a cluster once no namespace there has an allocation of it"
    ]
    assert ClusterCapacity.objects.filter(pk=capacity.pk).exists()
    with pytest.raises(ValidationFailed) as err:
        cluster_capacity_delete(capacity=capacity, acting_user=admin)
    assert err.value.field == "capacity"


def test_a_capacity_without_allocations_is_deleted_audited_and_synced(admin_client, admin, cluster):
    capacity = ClusterCapacity.objects.get()
    response = admin_client.post(
        f"/admin/quotas/clustercapacity/{capacity.pk}/delete/", {"post": "yes"}
    )
    assert response.status_code == 302
    assert not ClusterCapacity.objects.exists()
    event = AuditEvent.objects.get(action="capacity.deleted")
    assert (event.actor, event.after) == (admin, None)
    assert event.before == {"cluster": "demo", "resource": "nvidia.com/gpu", "capacity": "16"}
    assert SyncRequest.objects.filter(cluster=cluster).count() == 1


def test_a_removed_priority_class_is_pruned_from_the_cluster(
    admin, cluster, kube_sandbox, kube_client, django_capture_on_commit_callbacks
):
    from kubernetes import client as k8s

    from quotas.kube.sync import cluster_sync

    Cluster.objects.filter(pk=cluster.pk).update(sandbox_url=kube_sandbox.url)
    pc = priority_class_save(
        priority_class=PriorityClass(name="experiment", value=1000), acting_user=admin
    )

    def live_classes() -> set[str]:
        with django_capture_on_commit_callbacks(execute=False):
            run = cluster_sync(cluster_id=cluster.pk)
        assert run.status == "succeeded", run.error
        items = k8s.SchedulingV1Api(kube_client).list_priority_class().items
        return {item.metadata.name for item in items}

    assert "experiment" in live_classes()
    priority_class_delete(priority_class=pc, acting_user=admin)
    assert "experiment" not in live_classes()


def test_a_sandbox_url_typed_without_a_scheme_is_plain_http(rf, admin):
    """Said by the admin, not left to Django's default (which warns, and turns to https in
    Django 6)."""
    import warnings

    from django.contrib.admin.sites import site

    request = rf.get("/admin/quotas/cluster/add/")
    request.user = admin
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        form_class = site._registry[Cluster].get_form(request)
    field = form_class.base_fields["sandbox_url"]
    assert field.clean("127.0.0.1:8001") == "http://127.0.0.1:8001"
    assert field.clean("https://sandbox.example:6443") == "https://sandbox.example:6443"
