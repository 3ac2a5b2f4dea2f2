"""Load the demo data: the seed's 16-A100 example, a MIG cluster, demo users. Idempotent."""

from decimal import Decimal

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand
from django.db import transaction

from quotas.models import Cluster, ClusterCapacity, PriorityClass, Resource, Team, TeamNamespace
from quotas.models import TeamMembership as M
from quotas.roles import ensure_role_groups, sync_role_permissions
from quotas.services import allocation_set

DEMO_PASSWORD = "demo"  # noqa: S105 - the demo's documented logins, created only by this command

USERS = [
    # username, first name, platform admin, auditor
    ("admin", "Ada (platform admin)", True, False),
    ("admin2", "Bo (platform admin)", True, False),
    ("lead-a", "Lead of team A", False, False),
    ("lead-b", "Lead of team B", False, False),
    ("lead-c", "Lead of team C", False, False),
    ("viewer", "Read-only auditor", False, True),
]

RESOURCES = [
    # name, display name, kind, unit, gpu model
    ("nvidia.com/gpu", "A100 80GB card", Resource.Kind.GPU, "GPU", "A100 80GB"),
    ("nvidia.com/mig-1g.10gb", "A100 1g.10gb MIG slice", Resource.Kind.MIG, "slice", "A100 80GB"),
    ("nvidia.com/mig-3g.40gb", "A100 3g.40gb MIG slice", Resource.Kind.MIG, "slice", "A100 80GB"),
]

PRIORITY_CLASSES = [
    ("production-inference", 100000, "Online inference; preempts training and experiments.", True),
    ("training", 10000, "Scheduled training and batch inference.", True),
    ("experiment", 1000, "Small experiments; never preempt, may be preempted.", False),
]

TEAMS = [
    # slug, name, lead
    ("team-a", "Team A", "lead-a"),
    ("team-b", "Team B", "lead-b"),
    ("team-c", "Team C", "lead-c"),
]

CLUSTERS = [
    # name, display name, environment, volcano, kueue, yunikorn, capacities
    (
        "demo",
        "Demo cluster (16 A100)",
        Cluster.Environment.PRODUCTION,
        (True, False, False),
        {"nvidia.com/gpu": 16},
    ),
    (
        "demo-mig",
        "Demo MIG cluster (4 A100 split)",
        Cluster.Environment.STAGING,
        (False, True, True),
        {"nvidia.com/mig-1g.10gb": 14, "nvidia.com/mig-3g.40gb": 4},
    ),
]

# What Kueue may admit in cpu (cores) and memory (GiB): the demo-mig cluster's 4 nodes.
KUEUE_POOLS = {"demo-mig": (Decimal(256), Decimal(2048))}

# The seed document's example: 16 A100, team A 6/10, team B 4/6, team C 2/4.
NAMESPACES = [
    # cluster, namespace, team, workload class, {resource: (guarantee, cap, per-pod max, classes)}
    (
        "demo",
        "team-a-training",
        "team-a",
        TeamNamespace.WorkloadClass.TRAINING,
        {"nvidia.com/gpu": (6, 10, 8, ["training", "experiment"])},
    ),
    (
        "demo",
        "team-b-inference",
        "team-b",
        TeamNamespace.WorkloadClass.INFERENCE,
        {"nvidia.com/gpu": (4, 6, 2, ["production-inference"])},
    ),
    (
        "demo",
        "team-c-dev",
        "team-c",
        TeamNamespace.WorkloadClass.DEV,
        {"nvidia.com/gpu": (2, 4, None, ["experiment"])},
    ),
    (
        "demo-mig",
        "team-a-inference",
        "team-a",
        TeamNamespace.WorkloadClass.INFERENCE,
        {"nvidia.com/mig-3g.40gb": (1, 2, 1, ["production-inference"])},
    ),
    (
        "demo-mig",
        "team-b-dev",
        "team-b",
        TeamNamespace.WorkloadClass.DEV,
        {"nvidia.com/mig-1g.10gb": (4, 6, 2, ["experiment"])},
    ),
    (
        "demo-mig",
        "team-c-dev",
        "team-c",
        TeamNamespace.WorkloadClass.DEV,
        {"nvidia.com/mig-1g.10gb": (2, 4, 1, ["experiment"])},
    ),
]


class Command(BaseCommand):
    help = "Create or refresh the demo data (clusters demo and demo-mig, teams A-C, demo users)."

    @transaction.atomic
    def handle(self, *args, **options) -> None:
        sync_role_permissions()
        admins, auditors = ensure_role_groups()
        users = {}
        for username, first_name, is_admin, is_auditor in USERS:
            user, created = User.objects.get_or_create(
                username=username,
                defaults={
                    "first_name": first_name,
                    "email": f"{username}@example.com",
                    "is_staff": is_admin or is_auditor,
                },
            )
            if created:
                user.set_password(DEMO_PASSWORD)
                user.save(update_fields=["password"])
            if is_admin:
                user.groups.add(admins)
            if is_auditor:
                user.groups.add(auditors)
            users[username] = user

        resources = {}
        for name, display, kind, unit, model in RESOURCES:
            resources[name], _ = Resource.objects.update_or_create(
                name=name,
                defaults={"display_name": display, "kind": kind, "unit": unit, "gpu_model": model},
            )
        for name, value, description, preempts in PRIORITY_CLASSES:
            PriorityClass.objects.update_or_create(
                name=name,
                defaults={"value": value, "description": description, "preempts": preempts},
            )

        teams = {}
        for slug, name, lead in TEAMS:
            teams[slug], _ = Team.objects.update_or_create(slug=slug, defaults={"name": name})
            M.objects.update_or_create(
                team=teams[slug], user=users[lead], defaults={"role": M.Role.LEAD}
            )

        clusters = {}
        for name, display, environment, (volcano, kueue, yunikorn), capacities in CLUSTERS:
            cpu_pool, memory_pool = KUEUE_POOLS.get(name, (None, None))
            cluster, _ = Cluster.objects.update_or_create(
                name=name,
                defaults={
                    "display_name": display,
                    "environment": environment,
                    "connection": Cluster.Connection.SANDBOX,
                    "volcano_enabled": volcano,
                    "kueue_enabled": kueue,
                    "yunikorn_enabled": yunikorn,
                    "kueue_cpu_pool": cpu_pool,
                    "kueue_memory_pool_gib": memory_pool,
                },
            )
            clusters[name] = cluster
            for resource, amount in capacities.items():
                ClusterCapacity.objects.update_or_create(
                    cluster=cluster,
                    resource=resources[resource],
                    defaults={"capacity": Decimal(amount)},
                )

        for cluster, ns_name, team, workload, allocations in NAMESPACES:
            namespace, _ = TeamNamespace.objects.update_or_create(
                cluster=clusters[cluster],
                name=ns_name,
                defaults={"team": teams[team], "workload_class": workload},
            )
            for resource, (guarantee, cap, per_pod, classes) in allocations.items():
                allocation_set(
                    team_namespace=namespace,
                    resource=resources[resource],
                    guarantee=guarantee,
                    cap=cap,
                    per_pod_max=per_pod,
                    priority_classes=classes,
                    acting_user=users["admin"],
                    reason="demo data",
                    source="seed_demo",
                )

        self.stdout.write(
            self.style.SUCCESS(
                "Demo data ready: clusters demo, demo-mig; teams team-a, team-b, team-c.\n"
                "Logins (password 'demo'): admin, admin2 (platform admins), "
                "lead-a, lead-b, lead-c (team leads), viewer (auditor)."
            )
        )
