"""One selector decides who sees which teams and allocations."""

from decimal import Decimal

import pytest
from django.contrib.auth.models import AnonymousUser

from quotas.models import Cluster, ClusterCapacity, Resource, Team, TeamMembership, TeamNamespace
from quotas.selectors import (
    allocations_visible_to,
    capacity_summary,
    cluster_facts,
    namespaces_visible_to,
    plan_capacities,
    teams_led_by,
    teams_requestable_by,
    teams_visible_to,
)
from tests.support.people import make_user

pytestmark = pytest.mark.django_db


def slugs(qs) -> list[str]:
    return sorted(qs.values_list("slug", flat=True))


def test_admin_and_auditor_see_every_team(admin, auditor, team_a, team_b):
    assert slugs(teams_visible_to(admin)) == ["team-a", "team-b"]
    assert slugs(teams_visible_to(auditor)) == ["team-a", "team-b"]


def test_lead_and_member_see_only_their_team(lead_a, member_a, other_team_lead, alloc_a, alloc_b):
    assert slugs(teams_visible_to(lead_a)) == ["team-a"]
    assert slugs(teams_visible_to(member_a)) == ["team-a"]
    assert slugs(teams_visible_to(other_team_lead)) == ["team-b"]
    assert [a.team_namespace.name for a in allocations_visible_to(lead_a)] == ["team-a-training"]
    assert [n.name for n in namespaces_visible_to(other_team_lead)] == ["team-b-inference"]


def test_user_without_team_sees_nothing(db, alloc_a):
    nobody = make_user("nobody")
    assert not teams_visible_to(nobody).exists()
    assert not allocations_visible_to(nobody).exists()


def test_anonymous_and_inactive_users_see_nothing(lead_a, alloc_a):
    assert not teams_visible_to(AnonymousUser()).exists()
    lead_a.is_active = False
    lead_a.save()
    assert not teams_visible_to(lead_a).exists()


def test_inactive_admin_sees_nothing(admin, team_a):
    admin.is_active = False
    admin.save()
    assert not teams_visible_to(admin).exists()


def test_department_lead_sees_the_teams_below(db, cluster):
    dept = Team.objects.create(slug="research", name="Research")
    vision = Team.objects.create(slug="vision", name="Vision", parent=dept)
    Team.objects.create(slug="nlp", name="NLP", parent=vision)
    Team.objects.create(slug="ops", name="Ops")
    head = make_user("head")
    TeamMembership.objects.create(team=dept, user=head, role=TeamMembership.Role.LEAD)
    assert slugs(teams_visible_to(head)) == ["nlp", "research", "vision"]
    assert slugs(teams_led_by(head)) == ["nlp", "research", "vision"]


def test_member_is_not_a_lead(member_a, lead_a):
    assert not teams_led_by(member_a).exists()
    assert slugs(teams_led_by(lead_a)) == ["team-a"]


def test_capacity_summary_sums_guarantees_and_caps(alloc_a, alloc_b, cluster):
    [line] = capacity_summary()
    assert (line.cluster, line.resource, line.capacity) == ("demo", "nvidia.com/gpu", 16)
    assert (line.guaranteed, line.capped, line.free_guarantee) == (10, 16, 6)
    assert str(line.overcommit_ratio) == "1.00"
    assert not line.over_promised
    TeamNamespace.objects.filter(pk=alloc_b.team_namespace_id).delete()
    [line] = capacity_summary(cluster_ids=[cluster.id])
    assert (line.guaranteed, line.capped) == (6, 10)


def test_teams_requestable_by_admins_all_and_leads_theirs(
    admin, auditor, lead_a, member_a, other_team_lead, team_a, team_b
):
    department = Team.objects.create(slug="dept", name="Department")
    Team.objects.filter(pk=team_b.pk).update(parent=department)
    dept_lead = make_user("dept-lead")
    TeamMembership.objects.create(team=department, user=dept_lead, role=TeamMembership.Role.LEAD)
    assert slugs(teams_requestable_by(admin)) == ["dept", "team-a", "team-b"]
    assert slugs(teams_requestable_by(lead_a)) == ["team-a"]
    assert slugs(teams_requestable_by(dept_lead)) == ["dept", "team-b"]
    assert slugs(teams_requestable_by(member_a)) == []
    assert slugs(teams_requestable_by(auditor)) == []
    assert slugs(teams_requestable_by(AnonymousUser())) == []


def test_the_plan_check_reads_clusters_as_the_orm_does(cluster, gpu):
    """plan_capacities answers what the ORM's clusters and capacities give cluster_facts: MIG
    cards and slices, shares, backends, amounts with fractions, a cluster with no capacity;
    the fields it leaves out are read when asked for."""
    mig = Cluster.objects.create(
        name="mig",
        description="the MIG cluster",
        gpu_cards={"A100 80GB": 2, "unknown card": 1},
        kueue_enabled=True,
        yunikorn_enabled=True,
        max_cap_share=Decimal("0.75"),
        top_priority_share=Decimal("0.4"),
    )
    for name, capacity in (("nvidia.com/mig-3g.40gb", "4"), ("nvidia.com/mig-1g.10gb", "7")):
        slice_ = Resource.objects.create(
            name=name,
            display_name=name,
            kind=Resource.Kind.MIG,
            unit="slice",
            gpu_model="A100 80GB",
        )
        ClusterCapacity.objects.create(cluster=mig, resource=slice_, capacity=Decimal(capacity))
    memory = Resource.objects.create(
        name="memory",
        display_name="memory",
        kind=Resource.Kind.MEMORY,
        unit="GiB",
        quantity_suffix="Gi",
    )
    ClusterCapacity.objects.create(cluster=mig, resource=memory, capacity=Decimal("1.5"))
    bare = Cluster.objects.create(name="bare")

    clusters, capacities = plan_capacities([cluster.pk, mig.pk, bare.pk])
    assert sorted(clusters) == sorted([cluster.pk, mig.pk, bare.pk])
    assert capacities[bare.pk] == []
    top = frozenset({"production"})
    for pk in clusters:
        orm = Cluster.objects.get(pk=pk)
        orm_capacities = list(
            ClusterCapacity.objects.filter(cluster_id=pk).select_related("cluster", "resource")
        )
        assert [c.resource.name for c in capacities[pk]] == [
            c.resource.name for c in orm_capacities
        ]
        assert [(c.pk, c.resource_id, c.capacity) for c in capacities[pk]] == [
            (c.pk, c.resource_id, c.capacity) for c in orm_capacities
        ]
        assert cluster_facts(clusters[pk], capacities[pk], top_classes=top) == cluster_facts(
            orm, orm_capacities, top_classes=top
        )
    read = clusters[mig.pk]
    assert read.gpu_cards == {"A100 80GB": 2, "unknown card": 1}
    assert read.max_cap_share == Decimal("0.75") and read.backends == ["core", "kueue", "yunikorn"]
    assert cluster_facts(read, capacities[mig.pk], top_classes=top).mig_resources == {
        "nvidia.com/mig-1g.10gb": ("A100 80GB", "1g.10gb"),
        "nvidia.com/mig-3g.40gb": ("A100 80GB", "3g.40gb"),
    }
    assert read.description == "the MIG cluster"  # left out of the read, read when asked
    assert plan_capacities([]) == ({}, {})
