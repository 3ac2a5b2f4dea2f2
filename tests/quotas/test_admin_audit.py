"""Every admin change that decides who sees or gets what is one audit event, written in the same
transaction as the change, with the fields before and after; the chain still verifies.

Driven through the Django test client, as an admin would: each change page is read, its forms
sent back with one thing changed (or a row added, or deleted).
"""

import json
from decimal import Decimal

import pytest
from django import forms
from django.contrib.auth.models import Group, Permission, User
from django.db import IntegrityError, transaction

from approvals.lifecycle import request_approve, request_create
from approvals.lines import LineInput
from common.errors import ValidationFailed
from quotas.audit.chain import audit_verify
from quotas.audit.labels import ACTION_LABELS
from quotas.models import (
    AuditEvent,
    Cluster,
    ClusterCapacity,
    Resource,
    SyncRequest,
    Team,
    TeamMembership,
    TeamNamespace,
)
from quotas.people import user_delete
from quotas.roles import AUDITORS, PLATFORM_ADMINS, ensure_role_groups
from quotas.selectors import team_ids_of
from quotas.teams import team_delete, team_save

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, admin):
    client.force_login(admin)
    return client


@pytest.fixture
def root(db) -> User:
    """A superuser: the one who may change people in the admin (platform admins only view)."""
    return User.objects.create_superuser("root", "root@example.com", "pw")


@pytest.fixture
def root_client(client, root):
    client.force_login(root)
    return client


def page_data(response) -> dict:
    """The change page's forms (and inline formsets) as a browser sends them back unchanged."""
    assert response.status_code == 200, response.status_code
    data: dict = {"_save": "Save"}

    def add(form) -> None:
        for bound in form:
            if bound.field.disabled:
                continue
            widget, value = bound.field.widget, bound.value()
            if isinstance(widget, forms.MultiWidget):
                parts = value if isinstance(value, list) else widget.decompress(value)
                for suffix, part in zip(widget.widgets_names, parts, strict=True):
                    data[bound.html_name + suffix] = "" if part is None else str(part)
            elif isinstance(widget, forms.CheckboxInput):
                if value:
                    data[bound.html_name] = "on"
            elif isinstance(value, list | tuple):
                data[bound.html_name] = [str(v) for v in value]
            else:
                data[bound.html_name] = "" if value is None else str(value)

    add(response.context["adminform"].form)
    for inline in response.context["inline_admin_formsets"]:
        for bound in inline.formset.management_form:
            data[bound.html_name] = str(bound.value())
        for form in inline.formset.forms:
            add(form)
    return data


def set_box(data: dict, name: str, on: bool) -> None:
    if on:
        data[name] = "on"
    else:
        data.pop(name, None)


def events() -> list[AuditEvent]:
    return list(AuditEvent.objects.order_by("seq"))


def one_new_event(before: list[AuditEvent], action: str) -> AuditEvent:
    """The one event written since ``before``, of ``action``; the chain still verifies."""
    new = events()[len(before) :]
    assert [e.action for e in new] == [action]
    assert action in ACTION_LABELS  # the log page names it in words
    result = audit_verify()
    assert result.ok, result.reason
    return new[0]


def saved(response) -> None:
    assert response.status_code == 302, response.content.decode()[:3000]


@pytest.fixture
def team_c(db) -> Team:
    return Team.objects.create(slug="team-c", name="Team C")


# --- memberships: who leads a team, and so reads its requests -----------------------------------


def test_making_lead_b_a_lead_of_team_c_and_back_is_two_events(
    admin_client, admin, other_team_lead, team_c
):
    before = events()
    response = admin_client.post(
        "/admin/quotas/teammembership/add/",
        {"team": team_c.pk, "user": other_team_lead.pk, "role": "lead"},
    )
    saved(response)
    assert team_c.pk in team_ids_of(User.objects.get(pk=other_team_lead.pk))
    made = one_new_event(before, "membership.created")
    membership = TeamMembership.objects.get(team=team_c)
    assert (made.actor, made.target_type, made.target_id) == (
        admin,
        "TeamMembership",
        str(membership.pk),
    )
    assert made.before is None
    assert made.after == {"team": "team-c", "team_id": team_c.pk, "user": "lead-b", "role": "lead"}

    before = events()
    saved(
        admin_client.post(f"/admin/quotas/teammembership/{membership.pk}/delete/", {"post": "yes"})
    )
    assert team_c.pk not in team_ids_of(User.objects.get(pk=other_team_lead.pk))
    removed = one_new_event(before, "membership.deleted")
    assert removed.before == made.after and removed.after is None
    assert removed.target_id == str(membership.pk)


def test_a_role_change_records_the_role_with_whose_it_is(admin_client, member_a, team_a):
    membership = TeamMembership.objects.get(user=member_a)
    url = f"/admin/quotas/teammembership/{membership.pk}/change/"
    data = {**page_data(admin_client.get(url)), "role": "lead"}
    before = events()
    saved(admin_client.post(url, data))
    event = one_new_event(before, "membership.changed")
    named = {"team": "team-a", "team_id": team_a.pk, "user": "member-a"}
    assert event.before == {**named, "role": "member"}
    assert event.after == {**named, "role": "lead"}


def test_a_lead_added_on_the_team_page_is_one_membership_event(
    admin_client, other_team_lead, team_c
):
    url = f"/admin/quotas/team/{team_c.pk}/change/"
    data = page_data(admin_client.get(url))
    data.update(
        {
            "memberships-TOTAL_FORMS": "1",
            "memberships-0-team": str(team_c.pk),
            "memberships-0-user": str(other_team_lead.pk),
            "memberships-0-role": "lead",
        }
    )
    before = events()
    saved(admin_client.post(url, data))
    event = one_new_event(before, "membership.created")  # the team itself did not change
    assert event.after["user"] == "lead-b" and event.after["team"] == "team-c"


def test_a_lead_removed_on_the_team_page_is_one_membership_event(admin_client, lead_a, team_a):
    url = f"/admin/quotas/team/{team_a.pk}/change/"
    data = {**page_data(admin_client.get(url)), "memberships-0-DELETE": "on"}
    before = events()
    saved(admin_client.post(url, data))
    assert not TeamMembership.objects.filter(user=lead_a).exists()
    event = one_new_event(before, "membership.deleted")
    assert event.before["user"] == "lead-a" and event.before["role"] == "lead"


def test_the_team_filter_of_the_log_keeps_a_removed_membership(
    admin_client, other_team_lead, team_c
):
    admin_client.post(
        "/admin/quotas/teammembership/add/",
        {"team": team_c.pk, "user": other_team_lead.pk, "role": "lead"},
    )
    membership = TeamMembership.objects.get(team=team_c)
    admin_client.post(f"/admin/quotas/teammembership/{membership.pk}/delete/", {"post": "yes"})
    response = admin_client.get("/api/v1/audit-events/", {"team": "team-c"})
    assert response.status_code == 200
    actions = [e["action"] for e in response.json()["results"]]
    assert sorted(actions) == ["membership.created", "membership.deleted"]


# --- teams -------------------------------------------------------------------------------------


def test_a_team_added_changed_and_deleted_is_three_events(admin_client, admin, team_a):
    before = events()
    saved(
        admin_client.post(
            "/admin/quotas/team/add/",
            {
                "slug": "team-d",
                "name": "Team D",
                "memberships-TOTAL_FORMS": "0",
                "memberships-INITIAL_FORMS": "0",
                "namespaces-TOTAL_FORMS": "0",
                "namespaces-INITIAL_FORMS": "0",
            },
        )
    )
    created = one_new_event(before, "team.created")
    team = Team.objects.get(slug="team-d")
    assert created.after == {
        "slug": "team-d",
        "name": "Team D",
        "description": "",
        "parent": None,
        "contact_email": "",
        "gpu_ceiling": None,
    }

    url = f"/admin/quotas/team/{team.pk}/change/"
    data = {
        **page_data(admin_client.get(url)),
        "name": "Team D (vision)",
        "parent": team_a.pk,
        "gpu_ceiling": "24",
    }
    before = events()
    saved(admin_client.post(url, data))
    changed = one_new_event(before, "team.changed")
    assert changed.before == {
        "slug": "team-d",
        "name": "Team D",
        "parent": None,
        "gpu_ceiling": None,
    }
    assert changed.after == {
        "slug": "team-d",
        "name": "Team D (vision)",
        "parent": "team-a",
        "gpu_ceiling": "24",
    }

    before = events()
    saved(admin_client.post(f"/admin/quotas/team/{team.pk}/delete/", {"post": "yes"}))
    deleted = one_new_event(before, "team.deleted")
    assert deleted.before["slug"] == "team-d" and deleted.after is None
    assert not Team.objects.filter(pk=team.pk).exists()


def test_a_team_made_its_own_department_is_refused_on_its_field(admin_client, team_a, team_b):
    team_b.parent = team_a
    team_save(team=team_b, acting_user=None)
    url = f"/admin/quotas/team/{team_a.pk}/change/"
    before = events()
    response = admin_client.post(url, {**page_data(admin_client.get(url)), "parent": team_b.pk})
    assert response.status_code == 200  # the form again, with the error
    assert "parent: team-b is team-a or a team under it (no cycles)" in response.content.decode()
    assert events() == before
    assert Team.objects.get(pk=team_a.pk).parent is None


def test_a_team_rename_syncs_the_clusters_of_its_namespaces(admin_client, ns_a, team_a):
    url = f"/admin/quotas/team/{team_a.pk}/change/"
    data = {**page_data(admin_client.get(url)), "slug": "team-alpha"}
    before = events()
    saved(admin_client.post(url, data))
    event = one_new_event(before, "team.changed")
    assert (event.before, event.after) == ({"slug": "team-a"}, {"slug": "team-alpha"})
    assert SyncRequest.objects.filter(cluster=ns_a.cluster).count() == 1


# --- clusters: the cap share, the scheduler switches, the connection ----------------------------


def test_the_cap_share_and_scheduler_switches_are_one_event_and_a_sync(
    admin_client, admin, cluster
):
    url = f"/admin/quotas/cluster/{cluster.pk}/change/"
    data = {**page_data(admin_client.get(url)), "max_cap_share": "0.75"}
    set_box(data, "volcano_enabled", False)
    set_box(data, "kueue_enabled", True)
    set_box(data, "yunikorn_enabled", True)
    before = events()
    saved(admin_client.post(url, data))
    event = one_new_event(before, "cluster.changed")
    assert event.actor == admin and event.comment == "Django admin"
    assert event.before == {
        "name": "demo",
        "volcano_enabled": True,
        "kueue_enabled": False,
        "yunikorn_enabled": False,
        "max_cap_share": None,
    }
    assert event.after == {
        "name": "demo",
        "volcano_enabled": False,
        "kueue_enabled": True,
        "yunikorn_enabled": True,
        "max_cap_share": "0.75",
    }
    cluster.refresh_from_db()
    assert cluster.max_cap_share == Decimal("0.75") and cluster.backends == [
        "core",
        "kueue",
        "yunikorn",
    ]
    assert SyncRequest.objects.filter(cluster=cluster).count() == 1


def test_only_the_cap_share_changes_no_sync(admin_client, cluster):
    url = f"/admin/quotas/cluster/{cluster.pk}/change/"
    data = {**page_data(admin_client.get(url)), "max_cap_share": "0.4"}
    before = events()
    saved(admin_client.post(url, data))
    event = one_new_event(before, "cluster.changed")
    assert event.after == {"name": "demo", "max_cap_share": "0.4"}
    assert not SyncRequest.objects.exists()  # a rule of requests: nothing on the cluster moves


def test_a_connection_change_records_where_never_the_credentials(admin_client, cluster):
    url = f"/admin/quotas/cluster/{cluster.pk}/change/"
    data = {
        **page_data(admin_client.get(url)),
        "connection": "kubeconfig",
        "kubeconfig_path": "/etc/portal/kubeconfigs/demo.yaml",
        "kubeconfig_context": "gpu-admin",
        "sandbox_url": "https://ops:hunter2@sandbox.example:8443/api?token=s3cr3t",
    }
    before = events()
    saved(admin_client.post(url, data))
    event = one_new_event(before, "cluster.changed")
    assert event.after == {
        "name": "demo",
        "connection": "kubeconfig",
        "kubeconfig_path": "/etc/portal/kubeconfigs/demo.yaml",
        "kubeconfig_context": "gpu-admin",
        "sandbox_url": "https://sandbox.example:8443/api",
    }
    logged = json.dumps([event.before, event.after, event.comment, event.target_repr])
    assert "hunter2" not in logged and "s3cr3t" not in logged and "ops" not in logged


def test_a_cluster_added_and_deleted_is_two_events(admin_client, gpu):
    before = events()
    saved(
        admin_client.post(
            "/admin/quotas/cluster/add/",
            {
                "name": "spare",
                "environment": "test",
                "connection": "sandbox",
                "kueue_cohort": "portal",
                "yunikorn_namespace": "yunikorn",
                # What the form shows filled in (the suggestions' default prices).
                "suggest_idle_price": "1",
                "suggest_borrowed_price": "0.5",
                "suggest_inference_borrowed_price": "2",
                "suggest_blocked_price": "4",
                "capacities-TOTAL_FORMS": "0",
                "capacities-INITIAL_FORMS": "0",
                "namespaces-TOTAL_FORMS": "0",
                "namespaces-INITIAL_FORMS": "0",
            },
        )
    )
    created = one_new_event(before, "cluster.created")
    assert created.after["name"] == "spare" and created.after["connection"] == "sandbox"
    spare = Cluster.objects.get(name="spare")

    before = events()
    saved(admin_client.post(f"/admin/quotas/cluster/{spare.pk}/delete/", {"post": "yes"}))
    deleted = one_new_event(before, "cluster.deleted")
    assert deleted.before["name"] == "spare" and deleted.before["capacities"] == {}


# --- resources ---------------------------------------------------------------------------------


def test_a_resource_added_changed_and_deleted_is_three_events(admin_client, cluster, gpu):
    before = events()
    saved(
        admin_client.post(
            "/admin/quotas/resource/add/",
            {
                "name": "nvidia.com/mig-1g.10gb",
                "display_name": "1g.10gb",
                "kind": "mig",
                "unit": "slice",
            },
        )
    )
    created = one_new_event(before, "resource.created")
    assert created.after["kind"] == "mig"
    mig = Resource.objects.get(name="nvidia.com/mig-1g.10gb")

    url = f"/admin/quotas/resource/{gpu.pk}/change/"
    data = {**page_data(admin_client.get(url)), "display_name": "H100 card", "kind": "mig"}
    before = events()
    saved(admin_client.post(url, data))
    changed = one_new_event(before, "resource.changed")
    assert changed.before == {"name": "nvidia.com/gpu", "display_name": "A100 card", "kind": "gpu"}
    assert changed.after == {"name": "nvidia.com/gpu", "display_name": "H100 card", "kind": "mig"}
    assert SyncRequest.objects.filter(cluster=cluster).count() == 1  # it has a capacity of it

    before = events()
    saved(admin_client.post(f"/admin/quotas/resource/{mig.pk}/delete/", {"post": "yes"}))
    deleted = one_new_event(before, "resource.deleted")
    assert deleted.before["name"] == "nvidia.com/mig-1g.10gb"


# --- capacities (through their own service, long audited) ---------------------------------------


def test_a_capacity_edit_is_one_event_and_the_chain_verifies(admin_client, cluster):
    capacity = ClusterCapacity.objects.get()
    before = events()
    saved(
        admin_client.post(
            f"/admin/quotas/clustercapacity/{capacity.pk}/change/", {"capacity": "20"}
        )
    )
    event = one_new_event(before, "capacity.changed")
    assert (event.before, event.after["capacity"]) == ({"capacity": "16"}, "20")


# --- team namespaces ---------------------------------------------------------------------------


def test_a_namespace_added_moved_to_another_team_and_deleted(admin_client, cluster, team_a, team_b):
    before = events()
    saved(
        admin_client.post(
            "/admin/quotas/teamnamespace/add/",
            {
                "name": "team-a-eval",
                "team": team_a.pk,
                "cluster": cluster.pk,
                "workload_class": "inference",
                "allocations-TOTAL_FORMS": "0",
                "allocations-INITIAL_FORMS": "0",
            },
        )
    )
    created = one_new_event(before, "namespace.created")
    assert created.after == {
        "name": "team-a-eval",
        "cluster": "demo",
        "team": "team-a",
        "workload_class": "inference",
    }
    namespace = TeamNamespace.objects.get(name="team-a-eval")

    url = f"/admin/quotas/teamnamespace/{namespace.pk}/change/"
    data = {**page_data(admin_client.get(url)), "team": team_b.pk}
    before = events()
    saved(admin_client.post(url, data))
    moved = one_new_event(before, "namespace.changed")
    assert moved.before == {"name": "team-a-eval", "cluster": "demo", "team": "team-a"}
    assert moved.after == {"name": "team-a-eval", "cluster": "demo", "team": "team-b"}

    before = events()
    saved(admin_client.post(f"/admin/quotas/teamnamespace/{namespace.pk}/delete/", {"post": "yes"}))
    one_new_event(before, "namespace.deleted")


def test_a_namespace_with_allocations_keeps_its_cluster(admin_client, alloc_a, ns_a):
    other = Cluster.objects.create(name="other")
    url = f"/admin/quotas/teamnamespace/{ns_a.pk}/change/"
    before = events()
    response = admin_client.post(url, {**page_data(admin_client.get(url)), "cluster": other.pk})
    assert response.status_code == 200
    assert "team-a-training has allocations on its cluster" in response.content.decode()
    assert events() == before
    assert TeamNamespace.objects.get(pk=ns_a.pk).cluster_id == ns_a.cluster_id


# --- people: groups, superuser, staff ----------------------------------------------------------


def test_making_someone_a_platform_admin_records_the_role(root_client, root, lead_a):
    admins, _ = ensure_role_groups()
    url = f"/admin/auth/user/{lead_a.pk}/change/"
    data = {**page_data(root_client.get(url)), "groups": [str(admins.pk)]}
    set_box(data, "is_staff", True)
    before = events()
    saved(root_client.post(url, data))
    event = one_new_event(before, "user.changed")
    assert event.actor == root and event.target_id == str(lead_a.pk)
    assert event.before == {
        "username": "lead-a",
        "is_staff": False,
        "groups": [],
        "portal_roles": [],
    }
    assert event.after == {
        "username": "lead-a",
        "is_staff": True,
        "groups": [PLATFORM_ADMINS],
        "portal_roles": ["platform admin"],
    }
    logged = json.dumps([event.before, event.after])
    assert User.objects.get(pk=lead_a.pk).password not in logged


def test_a_superuser_flag_and_an_auditor_taken_away_are_recorded(root_client, auditor):
    url = f"/admin/auth/user/{auditor.pk}/change/"
    data = {**page_data(root_client.get(url)), "groups": []}
    set_box(data, "is_superuser", True)
    before = events()
    saved(root_client.post(url, data))
    event = one_new_event(before, "user.changed")
    assert event.before == {
        "username": "viewer",
        "is_superuser": False,
        "groups": [AUDITORS],
        "portal_roles": ["auditor"],
    }
    assert event.after == {
        "username": "viewer",
        "is_superuser": True,
        "groups": [],
        "portal_roles": ["platform admin"],
    }


def test_a_user_added_and_deleted_is_two_events_without_the_password(root_client):
    before = events()
    saved(
        root_client.post(
            "/admin/auth/user/add/",
            {
                "username": "newcomer",
                "password1": "a-Long-pass-phrase-42",
                "password2": "a-Long-pass-phrase-42",
                "usable_password": "true",
            },
        )
    )
    created = one_new_event(before, "user.created")
    user = User.objects.get(username="newcomer")
    assert created.after["username"] == "newcomer" and created.after["portal_roles"] == []
    assert "password" not in created.after
    assert user.password not in json.dumps(created.after)

    before = events()
    saved(root_client.post(f"/admin/auth/user/{user.pk}/delete/", {"post": "yes"}))
    deleted = one_new_event(before, "user.deleted")
    assert deleted.before["username"] == "newcomer" and deleted.after is None


def test_a_group_permission_change_is_one_event(root_client):
    group = Group.objects.create(name="capacity-planners")
    perm = Permission.objects.get(codename="view_clustercapacity")
    url = f"/admin/auth/group/{group.pk}/change/"
    data = {**page_data(root_client.get(url)), "permissions": [str(perm.pk)]}
    before = events()
    saved(root_client.post(url, data))
    event = one_new_event(before, "group.changed")
    assert event.before == {"name": "capacity-planners", "permissions": []}
    assert event.after == {
        "name": "capacity-planners",
        "permissions": ["quotas.view_clustercapacity"],
    }


def test_the_role_groups_keep_their_names_and_stay(root_client):
    admins, _ = ensure_role_groups()
    url = f"/admin/auth/group/{admins.pk}/change/"
    before = events()
    response = root_client.post(url, {**page_data(root_client.get(url)), "name": "former-admins"})
    assert response.status_code == 200
    assert "platform-admins is a role group of the portal; it keeps its name" in (
        response.content.decode()
    )
    response = root_client.post(f"/admin/auth/group/{admins.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert Group.objects.filter(name=PLATFORM_ADMINS).exists()
    assert events() == before


# --- a write that fails leaves no event -------------------------------------------------------


def test_an_event_is_rolled_back_with_the_write_it_records(admin):
    before = events()
    with pytest.raises(IntegrityError), transaction.atomic():
        team_save(team=Team(slug="team-x", name="X"), acting_user=admin)
        assert AuditEvent.objects.filter(action="team.created").exists()
        Team.objects.create(slug="team-x", name="duplicate")  # the same transaction fails on
    assert events() == before
    assert not Team.objects.filter(slug="team-x").exists()
    assert audit_verify().ok


def test_a_refused_delete_records_nothing(admin, lead_a, ns_a, gpu, alloc_a, strict_policy):
    request = request_create(
        team=ns_a.team,
        acting_user=lead_a,
        justification="more",
        lines=[LineInput(ns_a.pk, gpu.pk, 6, 8)],
        submit=True,
    )
    before = events()
    with pytest.raises(ValidationFailed) as err:
        team_delete(team=ns_a.team, acting_user=admin)
    assert err.value.message.startswith("team team-a has namespaces (team-a-training)")
    with pytest.raises(ValidationFailed) as err:
        user_delete(user=lead_a, acting_user=admin)  # their request needs them (PROTECT)
    assert err.value.message == (
        "lead-a is named in quota requests: deactivate the user instead (active off), which "
        "takes their roles and keeps that history"
    )
    request_approve(request=request, acting_user=admin, comment="ok")
    with pytest.raises(ValidationFailed) as err:
        user_delete(user=admin, acting_user=lead_a)  # their approval needs them
    assert err.value.message.startswith("admin is named in approvals: deactivate the user")
    assert [e for e in events()[len(before) :] if e.action.startswith(("team.", "user."))] == []
    assert User.objects.filter(pk__in=[lead_a.pk, admin.pk]).count() == 2


def test_a_user_with_history_is_refused_on_the_delete_page(root_client, admin, ns_a, gpu):
    from quotas.services import allocation_set

    allocation_set(team_namespace=ns_a, resource=gpu, guarantee=1, cap=2, acting_user=admin)
    url = f"/admin/auth/user/{admin.pk}/delete/"
    before = events()
    for response in (root_client.get(url), root_client.post(url, {"post": "yes"})):
        assert response.status_code == 302
        assert response["Location"].endswith(f"/auth/user/{admin.pk}/change/")
        # Deleting would null who changed the allocation, in the version history too.
        assert [str(m) for m in response.wsgi_request._messages][-1] == (
            "admin is named in allocation versions (changed by), allocations (updated by): "
            "deactivate the user instead (active off), which takes their roles and keeps that "
            "history"
        )
    assert User.objects.filter(pk=admin.pk).exists()
    assert events() == before


def test_a_team_page_save_with_a_refused_row_keeps_nothing(admin_client, alloc_a, ns_a, team_a):
    # The team page changes the team and, in its inline, moves a namespace that has
    # allocations: refused, so the team's change (and an event of it) is not made either.
    other = Cluster.objects.create(name="other")
    url = f"/admin/quotas/team/{team_a.pk}/change/"
    data = {**page_data(admin_client.get(url)), "name": "Team A renamed"}
    data["namespaces-0-cluster"] = str(other.pk)
    before = events()
    response = admin_client.post(url, data)
    assert response.status_code == 200
    assert "team-a-training has allocations on its cluster" in response.content.decode()
    assert events() == before
    assert Team.objects.get(pk=team_a.pk).name == "Team A"


# --- lock order: the services lock as every other transaction does ------------------------------


def test_the_services_take_their_locks_in_the_one_order(admin, lead_a, team_a, gpu):
    from quotas.clusters import cluster_delete, cluster_save, resource_delete, resource_save
    from quotas.people import group_delete, group_save, user_save
    from quotas.teams import (
        team_membership_delete,
        team_membership_save,
        team_namespace_delete,
        team_namespace_save,
    )
    from tests.support.locks import locks_of

    spare = Cluster(name="spare")
    locks_of(lambda: cluster_save(cluster=spare, acting_user=admin))
    ClusterCapacity.objects.create(cluster=spare, resource=gpu, capacity=Decimal(4))
    spare.kueue_enabled = True
    locks_of(lambda: cluster_save(cluster=spare, acting_user=admin))
    namespace = TeamNamespace(team=team_a, cluster=spare, name="team-a-spare")
    locks_of(lambda: team_namespace_save(team_namespace=namespace, acting_user=admin))
    namespace.workload_class = "dev"
    locks_of(lambda: team_namespace_save(team_namespace=namespace, acting_user=admin))
    gpu.display_name = "H100"
    locks_of(lambda: resource_save(resource=gpu, acting_user=admin))
    team_a.slug = "team-alpha"
    locks_of(lambda: team_save(team=team_a, acting_user=admin))
    membership = TeamMembership.objects.get(user=lead_a)
    membership.role = "member"
    locks_of(lambda: team_membership_save(membership=membership, acting_user=admin))
    locks_of(lambda: team_membership_delete(membership=membership, acting_user=admin))
    admins, _ = ensure_role_groups()
    locks_of(lambda: user_save(user=lead_a, groups=[admins], acting_user=admin))
    group = Group(name="planners")
    locks_of(lambda: group_save(group=group, acting_user=admin))
    locks_of(lambda: group_delete(group=group, acting_user=admin))
    locks_of(lambda: team_namespace_delete(team_namespace=namespace, acting_user=admin))
    ClusterCapacity.objects.filter(cluster=spare).delete()
    locks_of(lambda: cluster_delete(cluster=spare, acting_user=admin))
    mig = Resource.objects.create(name="nvidia.com/mig-1g.10gb", display_name="1g.10gb")
    locks_of(lambda: resource_delete(resource=mig, acting_user=admin))
    # (user_delete is left out: the SET NULLs it issues on requests and allocations touch no
    # row, since it refuses a user those rows name.)
    gone = Team.objects.create(slug="x", name="X")
    TeamMembership.objects.create(team=gone, user=lead_a)
    locks_of(lambda: team_delete(team=gone, acting_user=admin))


# --- writes outside the services ------------------------------------------------------------


@pytest.fixture
def elsewhere(settings):
    """The receivers on, as in production (the test settings turn them off for fixtures)."""
    settings.AUDIT_USERS_WRITTEN_ELSEWHERE = True


def test_createsuperuser_is_a_new_platform_admin_in_the_audit_log(monkeypatch, elsewhere):
    from django.core.management import call_command

    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "a long enough password 1")
    call_command("createsuperuser", "--noinput", "--username", "boot", "--email", "b@example.com")
    event = AuditEvent.objects.get(action="user.created", target_repr="boot")
    assert event.actor is None and "outside the portal's services" in event.comment
    assert event.after["is_superuser"] is True
    assert event.after["portal_roles"] == ["platform admin"]
    assert "password" not in json.dumps(event.after)


def test_roles_given_in_the_shell_are_audited_from_either_side(lead_a, elsewhere):
    from quotas.roles import AUDITORS, PLATFORM_ADMINS

    lead_a.is_superuser = True
    lead_a.save()
    event = AuditEvent.objects.filter(action="user.changed").latest("seq")
    assert (event.before["is_superuser"], event.after["is_superuser"]) == (False, True)
    assert event.after["portal_roles"] == ["platform admin"]

    auditors, _ = Group.objects.get_or_create(name=AUDITORS)
    auditors.user_set.add(lead_a)  # the group's side
    event = AuditEvent.objects.filter(action="user.changed").latest("seq")
    assert event.after["groups"] == [AUDITORS] and "auditor" in event.after["portal_roles"]

    admins, _ = Group.objects.get_or_create(name=PLATFORM_ADMINS)
    lead_a.groups.add(admins)  # the user's side
    event = AuditEvent.objects.filter(action="user.changed").latest("seq")
    assert PLATFORM_ADMINS in event.after["groups"]


def test_a_login_or_a_new_password_is_no_role_change(client, lead_a, elsewhere):
    count = AuditEvent.objects.count()
    response = client.post("/login/", {"username": "lead-a", "password": "pw"})
    assert response.status_code == 302
    lead_a.set_password("another one")
    lead_a.save(update_fields=["password"])
    assert AuditEvent.objects.count() == count


def test_a_service_write_is_one_event_not_two(admin, lead_a, elsewhere):
    from quotas.people import user_save

    count = AuditEvent.objects.count()
    lead_a.is_staff = True
    user_save(user=lead_a, acting_user=admin)
    assert AuditEvent.objects.count() == count + 1
    assert AuditEvent.objects.latest("seq").actor == admin
