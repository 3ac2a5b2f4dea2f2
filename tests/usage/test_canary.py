"""The canary metrics (usage.canary) and the usage page's table of them: utilization weighted by
GPU-hours, and on a MIG cluster figures labelled by what they count (slice-hours), one table
per resource, never hours of different resources added up."""

from datetime import date, timedelta
from decimal import Decimal

import pytest

from quotas.models import Cluster, ClusterCapacity, Resource, TeamNamespace
from quotas.services import allocation_set
from tests.support.usage import rollup
from usage.canary import canary_metrics
from usage.suggestions import suggestions_compute

pytestmark = pytest.mark.django_db
JUNE = date(2025, 6, 1)


def test_the_utilization_of_all_teams_is_weighted_by_gpu_hours(alloc_a, alloc_b, gpu, admin):
    for i in range(10):
        # team-a: 1 GPU at 90% all day; team-b: 10 GPUs at 10%.
        rollup(alloc_a.team_namespace, gpu, JUNE + timedelta(i), peak=1, util=Decimal(90))
        rollup(alloc_b.team_namespace, gpu, JUNE + timedelta(i), peak=10, util=Decimal(10))
    rows = canary_metrics(
        user=admin, cluster=alloc_a.team_namespace.cluster, start=JUNE, end=JUNE + timedelta(9)
    )
    by_team = {r.team: r for r in rows}
    assert by_team["team-a"].utilization_mean == Decimal("90.0")
    assert by_team["team-b"].utilization_mean == Decimal("10.0")
    # (240 h x 90 + 2400 h x 10) / 2640 h, not the plain mean of the teams (50).
    assert by_team[""].utilization_mean == Decimal("17.3")


def test_a_day_of_more_gpu_hours_weighs_more_within_a_team(alloc_a, gpu, admin):
    rollup(alloc_a.team_namespace, gpu, JUNE, peak=1, util=Decimal(100))
    rollup(alloc_a.team_namespace, gpu, JUNE + timedelta(1), peak=3, util=Decimal(20))
    rows = canary_metrics(
        user=admin, cluster=alloc_a.team_namespace.cluster, start=JUNE, end=JUNE + timedelta(1)
    )
    assert rows[0].utilization_mean == Decimal("40.0")  # (24 x 100 + 72 x 20) / 96


@pytest.fixture
def mig_cluster(team_a, team_b, admin):
    cluster = Cluster.objects.create(name="demo-mig")
    slices = {}
    for name, capacity in (("nvidia.com/mig-1g.10gb", 14), ("nvidia.com/mig-3g.40gb", 4)):
        slices[name] = Resource.objects.create(
            name=name, display_name=f"{name} slice", kind=Resource.Kind.MIG, unit="slice"
        )
        ClusterCapacity.objects.create(cluster=cluster, resource=slices[name], capacity=capacity)
    for team in (team_a, team_b):
        ns = TeamNamespace.objects.create(team=team, cluster=cluster, name=f"{team.slug}-dev")
        for resource in slices.values():
            allocation_set(
                team_namespace=ns, resource=resource, guarantee=1, cap=2, acting_user=admin
            )
            for i in range(3):
                rollup(ns, resource, JUNE + timedelta(i), peak=2, util=Decimal(50))
    return cluster


def test_a_mig_cluster_counts_slice_hours_per_slice_profile(client, mig_cluster, admin):
    client.force_login(admin)
    html = client.get("/usage/?cluster=demo-mig&start=2025-06-01&end=2025-06-03").content.decode()
    assert "GPU-hours" not in html and "GPU utilization" not in html
    assert html.count('<th class="num">slice-hours</th>') == 2  # one table per profile
    assert "Mean slice utilization" in html and "Idle guaranteed slice-hours" in html
    assert 'data-testid="canary-nvidia.com/mig-1g.10gb"' in html
    assert 'data-testid="canary-nvidia.com/mig-3g.40gb"' in html
    # Each profile's total is its own: 2 teams x 3 days x 48 slice-hours, not both profiles'.
    total = html.split('data-testid="canary-nvidia.com/mig-3g.40gb"', 1)[1]
    total = total.split('data-testid="canary-all"', 1)[1].split("</tr>", 1)[0]
    assert '<td class="num" data-label="slice-hours" data-testid="hours">288</td>' in total


def test_a_gpu_cluster_keeps_its_gpu_hours(client, alloc_a, gpu, lead_a):
    rollup(alloc_a.team_namespace, gpu, JUNE, peak=2, util=Decimal(40))
    client.force_login(lead_a)
    html = client.get("/usage/?cluster=demo&start=2025-06-01&end=2025-06-02").content.decode()
    assert '<th class="num">GPU-hours</th>' in html and "slice-hours" not in html


def test_a_mig_suggestion_names_its_figures_in_slices(client, mig_cluster, admin):
    suggestions_compute(cluster=mig_cluster, month=JUNE, today=date(2025, 7, 1))
    client.force_login(admin)
    html = client.get("/suggestions/?cluster=demo-mig").content.decode()
    assert 'data-testid="suggestion-' in html
    assert "<dt>slice-hours</dt>" in html and "<dt>idle guaranteed slice-hours</dt>" in html
    assert "GPU-hours" not in html and "GPU utilization" not in html
