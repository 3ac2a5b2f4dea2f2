"""The soak's data, made through the portal's own services: two clusters with capacity and
approval policies (one needs two admins above one unit), teams under a department with
leads, platform admins, an API token per person, and beat schedules short enough for a run
of minutes. Runs in the harness with Django set up on the soak database."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from decimal import Decimal

VOLCANO = "soak-volcano"
KUEUE = "soak-kueue"
GPU = "nvidia.com/gpu"
MIG = "nvidia.com/mig-1g.10gb"

# cluster: (backends (volcano, kueue, yunikorn), resource, capacity, initial guarantee/cap)
CLUSTERS = {
    VOLCANO: ((True, False, False), GPU, 64, (4, 8)),
    KUEUE: ((False, True, True), MIG, 48, (3, 6)),
}
# Approval policy per cluster: on the Kueue cluster every increase above one unit needs two
# distinct admins; on both, increases of one unit are approved at once within the budget.
POLICIES = {
    VOLCANO: {"auto_approve_increase_max": 1, "two_admins_above": 4, "auto_approve_budget": 2},
    KUEUE: {"auto_approve_increase_max": 1, "two_admins_above": 1, "auto_approve_budget": 2},
}
PRIORITY_CLASSES = [
    ("production-inference", 100000, True),
    ("training", 10000, True),
    ("experiment", 1000, False),
]
# Beat entries: seconds between runs during a soak (the defaults are minutes to hours).
SCHEDULES = {
    "reconcile clusters": 5,
    "request lifecycle": 5,
    "worker heartbeat": 30,
    "anchor audit log": 10,
    "collect usage": 30,
}
DISABLED_SCHEDULES = ("roll up usage", "monthly suggestions")


@dataclass
class Person:
    username: str
    token: str
    team: str = ""  # leads: the team they lead


@dataclass
class Dataset:
    leads: list[Person] = field(default_factory=list)
    admins: list[Person] = field(default_factory=list)
    # team slug -> [(cluster, namespace, resource)]
    namespaces: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    capacity: dict[tuple[str, str], Decimal] = field(default_factory=dict)


def _token(username: str) -> str:
    from django.core.management import call_command

    out = io.StringIO()
    call_command("create_api_token", username, name="soak", stdout=out, stderr=io.StringIO())
    return out.getvalue().strip()


def _schedules() -> None:
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    for name, seconds in SCHEDULES.items():
        every, _ = IntervalSchedule.objects.get_or_create(
            every=seconds, period=IntervalSchedule.SECONDS
        )
        PeriodicTask.objects.filter(name=name).update(interval=every, crontab=None)
    PeriodicTask.objects.filter(name__in=DISABLED_SCHEDULES).update(enabled=False)


def seed(*, teams: int, admins: int, sandbox_urls: dict[str, str]) -> Dataset:
    """Create the soak's data; ``sandbox_urls`` maps each cluster to its sandbox API."""
    from django.contrib.auth.models import User
    from django.db import transaction

    from approvals.models import ApprovalPolicy
    from approvals.policy.clusters import approval_policy_save
    from quotas.models import (
        Cluster,
        ClusterCapacity,
        PriorityClass,
        Resource,
        Team,
        TeamMembership,
        TeamNamespace,
    )
    from quotas.roles import ensure_role_groups, sync_role_permissions
    from quotas.services import allocation_set

    data = Dataset()
    with transaction.atomic():
        sync_role_permissions()
        admin_group, _ = ensure_role_groups()
        admin_users = []
        for i in range(1, admins + 1):
            user = User.objects.create_user(
                f"admin-{i}", f"admin-{i}@example.com", None, is_staff=True
            )
            user.groups.add(admin_group)
            admin_users.append(user)
        resources = {
            GPU: Resource.objects.create(
                name=GPU, display_name="A100", kind=Resource.Kind.GPU, unit="GPU"
            ),
            MIG: Resource.objects.create(
                name=MIG, display_name="1g.10gb slice", kind=Resource.Kind.MIG, unit="slice"
            ),
        }
        for name, value, preempts in PRIORITY_CLASSES:
            PriorityClass.objects.create(name=name, value=value, preempts=preempts)
        clusters = {}
        for name, ((volcano, kueue, yunikorn), resource, capacity, _) in CLUSTERS.items():
            clusters[name] = Cluster.objects.create(
                name=name,
                connection=Cluster.Connection.SANDBOX,
                sandbox_url=sandbox_urls[name],
                volcano_enabled=volcano,
                kueue_enabled=kueue,
                yunikorn_enabled=yunikorn,
                kueue_cpu_pool=Decimal(256) if kueue else None,
                kueue_memory_pool_gib=Decimal(2048) if kueue else None,
            )
            ClusterCapacity.objects.create(
                cluster=clusters[name], resource=resources[resource], capacity=capacity
            )
            data.capacity[(name, resource)] = Decimal(capacity)
            approval_policy_save(
                policy=ApprovalPolicy(cluster=clusters[name], **POLICIES[name]),
                acting_user=admin_users[0],
            )
        department = Team.objects.create(slug="dept-ml", name="ML department")
        for i in range(1, teams + 1):
            slug = f"team-{i:02d}"
            team = Team.objects.create(
                slug=slug, name=f"Team {i}", parent=department if i % 2 else None
            )
            lead = User.objects.create_user(f"lead-{i:02d}", f"lead-{i:02d}@example.com", None)
            TeamMembership.objects.create(team=team, user=lead, role=TeamMembership.Role.LEAD)
            data.namespaces[slug] = []
            for cluster_name, (_, resource, _, (guarantee, cap)) in CLUSTERS.items():
                suffix = "train" if cluster_name == VOLCANO else "dev"
                ns = TeamNamespace.objects.create(
                    team=team, cluster=clusters[cluster_name], name=f"{slug}-{suffix}"
                )
                allocation_set(
                    team_namespace=ns,
                    resource=resources[resource],
                    guarantee=guarantee,
                    cap=cap,
                    priority_classes=["training", "experiment"],
                    acting_user=admin_users[0],
                    reason="soak data",
                    source="soak",
                )
                data.namespaces[slug].append((cluster_name, ns.name, resource))
        _schedules()
    for user in admin_users:
        data.admins.append(Person(user.username, _token(user.username)))
    for i in range(1, teams + 1):
        username = f"lead-{i:02d}"
        data.leads.append(Person(username, _token(username), team=f"team-{i:02d}"))
    return data
