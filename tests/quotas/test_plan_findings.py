"""plan_findings lists the violations the stored allocations already have."""

from decimal import Decimal

import pytest
from django.core.management import call_command

from quotas.models import Allocation, Cluster, ClusterCapacity, Resource
from quotas.rules import Finding
from quotas.selectors import plan_findings

pytestmark = pytest.mark.django_db

SEED_FINDING = Finding(
    level="error",
    rule="cap_le_share",
    field="cap",
    message="cap 10 exceeds 50% of cluster demo capacity 16 nvidia.com/gpu (max 8)",
    cluster="demo",
    namespace="team-a-training",
    resource="nvidia.com/gpu",
)


@pytest.fixture
def seeded():
    call_command("seed_demo", verbosity=0)


def test_seed_demo_has_exactly_team_a_cap_above_half_the_cluster(seeded):
    assert plan_findings() == [SEED_FINDING]


def test_filtering_by_cluster(seeded):
    demo = Cluster.objects.get(name="demo")
    demo_mig = Cluster.objects.get(name="demo-mig")
    assert plan_findings(cluster_ids=[demo.id]) == [SEED_FINDING]
    assert plan_findings(cluster_ids=[demo_mig.id]) == []
    assert plan_findings(cluster_ids=[]) == []


def test_the_cluster_share_setting_is_used(seeded):
    Cluster.objects.filter(name="demo").update(max_cap_share=Decimal("0.625"))
    assert plan_findings() == []


def test_the_portal_default_share_is_used(seeded, settings):
    settings.QUOTA_DEFAULT_MAX_CAP_SHARE = 0.25
    caps_above = {(f.cluster, f.namespace) for f in plan_findings() if f.rule == "cap_le_share"}
    assert caps_above == {
        ("demo", "team-a-training"),  # 10 > 4 of 16
        ("demo", "team-b-inference"),  # 6 > 4; team C's 4 is not above
        ("demo-mig", "team-a-inference"),  # 2 > 1 of 4 3g.40gb slices
        ("demo-mig", "team-b-dev"),  # 6 > 3.5 of 14 1g.10gb slices
        ("demo-mig", "team-c-dev"),  # 4 > 3.5
    }


def test_lowered_capacity_shows_over_promised_guarantees_and_missing_capacity(seeded):
    demo = Cluster.objects.get(name="demo")
    ClusterCapacity.objects.filter(cluster=demo).update(capacity=Decimal(10))
    mig = Resource.objects.get(name="nvidia.com/mig-3g.40gb")
    ClusterCapacity.objects.filter(cluster__name="demo-mig", resource=mig).delete()

    findings = plan_findings()
    assert [(f.level, f.cluster, f.namespace, f.rule) for f in findings] == [
        ("error", "demo", "", "guarantees_le_capacity"),
        ("error", "demo", "team-a-training", "cap_le_share"),
        ("error", "demo", "team-b-inference", "cap_le_share"),
        ("error", "demo-mig", "team-a-inference", "unknown_capacity"),
    ]
    assert findings[0].message == (
        "guarantees on cluster demo sum to 12 nvidia.com/gpu, above its capacity 10 (over by 2)"
    )
    assert findings[3].message == "cluster demo-mig has no capacity for nvidia.com/mig-3g.40gb"


def test_no_clusters_no_findings():
    assert plan_findings() == []
    assert not Allocation.objects.exists()
