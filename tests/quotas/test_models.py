"""What must never be stored is refused by the database itself, not only by forms."""

from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction

from quotas.models import (
    Allocation,
    AllocationVersion,
    Cluster,
    ClusterCapacity,
    Team,
    TeamNamespace,
)

pytestmark = pytest.mark.django_db


def _refused(create) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        create()


@pytest.mark.parametrize(
    ("guarantee", "cap", "per_pod_max"),
    [
        (-1, 4, None),  # negative guarantee
        (0, -1, None),  # negative cap
        (6, 4, None),  # guarantee above cap
        (2, 4, 5),  # per-pod max above cap
        (2, 4, 0),  # per-pod max zero
        (2, 4, -1),  # per-pod max negative
    ],
)
def test_bad_allocation_values_are_refused_by_the_database(ns_a, gpu, guarantee, cap, per_pod_max):
    _refused(
        lambda: Allocation.objects.create(
            team_namespace=ns_a,
            resource=gpu,
            guarantee=Decimal(guarantee),
            cap=Decimal(cap),
            per_pod_max=None if per_pod_max is None else Decimal(per_pod_max),
        )
    )


def test_good_allocation_is_stored(ns_a, gpu):
    a = Allocation.objects.create(
        team_namespace=ns_a, resource=gpu, guarantee=Decimal(4), cap=Decimal(4), per_pod_max=4
    )
    assert Allocation.objects.get(pk=a.pk).cap == 4


def test_versions_refuse_the_same_bad_values(alloc_a):
    _refused(
        lambda: AllocationVersion.objects.create(
            allocation=alloc_a, version=99, guarantee=Decimal(7), cap=Decimal(3)
        )
    )


def test_version_numbers_are_unique_per_allocation(alloc_a):
    _refused(
        lambda: AllocationVersion.objects.create(
            allocation=alloc_a, version=1, guarantee=Decimal(1), cap=Decimal(3)
        )
    )


def test_one_allocation_per_namespace_and_resource(alloc_a, ns_a, gpu):
    _refused(
        lambda: Allocation.objects.create(
            team_namespace=ns_a, resource=gpu, guarantee=Decimal(1), cap=Decimal(2)
        )
    )


def test_duplicate_namespace_on_one_cluster_is_refused(ns_a, team_b, cluster):
    _refused(lambda: TeamNamespace.objects.create(team=team_b, cluster=cluster, name=ns_a.name))


def test_same_namespace_name_on_another_cluster_is_fine(ns_a, team_a):
    other = Cluster.objects.create(name="other")
    TeamNamespace.objects.create(team=team_a, cluster=other, name=ns_a.name)
    assert TeamNamespace.objects.filter(name=ns_a.name).count() == 2


def test_negative_capacity_is_refused(cluster, gpu):
    ClusterCapacity.objects.filter(cluster=cluster).delete()
    _refused(
        lambda: ClusterCapacity.objects.create(cluster=cluster, resource=gpu, capacity=Decimal(-1))
    )


def test_capacity_is_unique_per_cluster_and_resource(cluster, gpu):
    _refused(lambda: ClusterCapacity.objects.create(cluster=cluster, resource=gpu, capacity=1))


def test_cap_share_outside_0_1_is_refused():
    _refused(lambda: Cluster.objects.create(name="c1", max_cap_share=Decimal("1.5")))
    _refused(lambda: Cluster.objects.create(name="c2", max_cap_share=Decimal("0")))


def test_kubeconfig_connection_needs_a_path():
    _refused(lambda: Cluster.objects.create(name="c3", connection="kubeconfig"))
    Cluster.objects.create(name="c4", connection="kubeconfig", kubeconfig_path="/etc/k/config")


def test_team_cannot_be_its_own_parent(team_a):
    team_a.parent = team_a
    _refused(lambda: team_a.save())


def test_effective_cap_share_defaults_to_setting(settings, cluster):
    settings.QUOTA_DEFAULT_MAX_CAP_SHARE = 0.4
    assert cluster.effective_max_cap_share == Decimal("0.4")
    cluster.max_cap_share = Decimal("0.75")
    assert cluster.effective_max_cap_share == Decimal("0.75")


def test_backends_always_include_core(cluster):
    assert cluster.backends == ["core", "volcano"]
    cluster.kueue_enabled = cluster.yunikorn_enabled = True
    cluster.volcano_enabled = False
    assert cluster.backends == ["core", "kueue", "yunikorn"]


def test_team_ancestors_stop_on_cycle():
    dept = Team.objects.create(slug="dept", name="Dept")
    team = Team.objects.create(slug="t", name="T", parent=dept)
    assert team.ancestors() == [dept]
    Team.objects.filter(pk=dept.pk).update(parent=team)  # a cycle written behind our back
    team.refresh_from_db()
    assert [t.slug for t in team.ancestors()] == ["dept"]
