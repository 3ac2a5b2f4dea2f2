"""Load the demo data: the seed's 16-A100 example, a MIG cluster, demo users. Idempotent.

Everything goes through the services the admin uses, so the demo's own setup is in the audit
log like any later change (a second run changes, and records, nothing).
"""

from decimal import Decimal

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand
from django.db import models, transaction

from common.errors import ValidationFailed
from quotas.audit.anchors import audit_anchor_write
from quotas.clusters import cluster_save, resource_save
from quotas.models import Cluster, PriorityClass, Resource, Team, TeamNamespace
from quotas.models import TeamMembership as M
from quotas.people import user_save
from quotas.roles import ensure_role_groups, sync_role_permissions
from quotas.services import (
    allocation_set,
    cluster_capacity_set,
    priority_class_save,
    run_time_limit_set,
)
from quotas.teams import team_membership_save, team_namespace_save, team_save

SOURCE = "seed_demo"

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
# The MIG-capable cards of a cluster: the demo-mig cluster's 4 A100 80GB, from which its
# guaranteed slices must be cut (14 1g.10gb and 4 3g.40gb can be: two cards of seven 1g, two
# of two 3g).
GPU_CARDS = {"demo-mig": {"A100 80GB": 4}}
# The highest priority class used sparingly (the seed document: not everything at the top):
# at most 40% of each resource may be guaranteed to namespaces allowed production-inference.
TOP_PRIORITY_SHARE = Decimal("0.4")

# The clusters' GPU-hour prices (QUOTA_CURRENCY): the own A100s, and the MIG cluster as a
# cloud's (a 3g.40gb slice costs half, a 1g.10gb a seventh of it).
# The source document's answer for long experiments: a maximum run time, after which their GPUs
# are free again. (cluster, namespace, priority class, seconds)
RUN_TIME_LIMITS = [("demo", "team-c-dev", "experiment", 24 * 3600)]
GPU_HOUR_PRICES = {"demo": Decimal("1.20"), "demo-mig": Decimal("2.50")}
# Each team's ceiling over both clusters, in GPUs (a MIG slice by its share of a card): team A
# holds 10 + 2 × 1/2 = 11, team B 6 + 6/7, team C 4 + 4/7, so team C's cap 6 on demo is
# refused (6.57 > 6) though the 50% rule allows it.
GPU_CEILINGS = {"team-a": Decimal(12), "team-b": Decimal(8), "team-c": Decimal(6)}

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


def _with(model: type[models.Model], lookup: dict, values: dict) -> models.Model:
    """The row of ``lookup`` (a new one if there is none) holding ``values``, not saved: the
    caller's service saves it, and records it only where something changed."""
    row = model.objects.filter(**lookup).first() or model(**lookup)
    for field, value in values.items():
        setattr(row, field, value)
    return row


class Command(BaseCommand):
    help = "Create or refresh the demo data (clusters demo and demo-mig, teams A-C, demo users)."

    @transaction.atomic
    def handle(self, *args, **options) -> None:
        sync_role_permissions()
        admins, auditors = ensure_role_groups()
        users = {}
        for username, first_name, is_admin, is_auditor in USERS:
            user = User.objects.filter(username=username).first()
            if user is None:
                user = User(
                    username=username,
                    first_name=first_name,
                    email=f"{username}@example.com",
                    is_staff=is_admin or is_auditor,
                )
                user.set_password(DEMO_PASSWORD)
            groups = set(user.groups.all()) if user.pk else set()
            groups |= {admins} if is_admin else set()
            groups |= {auditors} if is_auditor else set()
            users[username] = user_save(user=user, groups=groups, acting_user=None, comment=SOURCE)

        resources = {}
        for name, display, kind, unit, model in RESOURCES:
            resources[name] = resource_save(
                resource=_with(
                    Resource,
                    {"name": name},
                    {"display_name": display, "kind": kind, "unit": unit, "gpu_model": model},
                ),
                acting_user=None,
                comment=SOURCE,
            )
        for name, value, description, preempts in PRIORITY_CLASSES:
            try:
                priority_class_save(
                    priority_class=_with(
                        PriorityClass,
                        {"name": name},
                        {"value": value, "description": description, "preempts": preempts},
                    ),
                    acting_user=None,
                )
            except ValidationFailed as exc:  # made otherwise by now (immutable): keep it
                self.stderr.write(f"kept priority class {name}: {exc.message}")

        teams = {}
        for slug, name, lead in TEAMS:
            teams[slug] = team_save(
                team=_with(
                    Team, {"slug": slug}, {"name": name, "gpu_ceiling": GPU_CEILINGS.get(slug)}
                ),
                acting_user=None,
                comment=SOURCE,
            )
            team_membership_save(
                membership=_with(
                    M, {"team": teams[slug], "user": users[lead]}, {"role": M.Role.LEAD}
                ),
                acting_user=None,
                comment=SOURCE,
            )

        clusters = {}
        for name, display, environment, (volcano, kueue, yunikorn), capacities in CLUSTERS:
            cpu_pool, memory_pool = KUEUE_POOLS.get(name, (None, None))
            cluster = cluster_save(
                cluster=_with(
                    Cluster,
                    {"name": name},
                    {
                        "display_name": display,
                        "environment": environment,
                        "connection": Cluster.Connection.SANDBOX,
                        "volcano_enabled": volcano,
                        "kueue_enabled": kueue,
                        "yunikorn_enabled": yunikorn,
                        "kueue_cpu_pool": cpu_pool,
                        "kueue_memory_pool_gib": memory_pool,
                        "gpu_cards": GPU_CARDS.get(name, {}),
                        "top_priority_share": TOP_PRIORITY_SHARE,
                        "gpu_hour_price": GPU_HOUR_PRICES.get(name),
                    },
                ),
                acting_user=None,
                comment=SOURCE,
            )
            clusters[name] = cluster
            for resource, amount in capacities.items():
                try:
                    cluster_capacity_set(
                        cluster=cluster,
                        resource=resources[resource],
                        capacity=Decimal(amount),
                        acting_user=None,
                    )
                except ValidationFailed as exc:  # more is guaranteed there by now: keep it
                    self.stderr.write(f"kept the capacity of {resource} on {name}: {exc.message}")

        for cluster, ns_name, team, workload, allocations in NAMESPACES:
            namespace = team_namespace_save(
                team_namespace=_with(
                    TeamNamespace,
                    {"cluster": clusters[cluster], "name": ns_name},
                    {"team": teams[team], "workload_class": workload},
                ),
                acting_user=None,
                comment=SOURCE,
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
                    source=SOURCE,
                )
        for cluster, ns_name, class_name, seconds in RUN_TIME_LIMITS:
            run_time_limit_set(
                team_namespace=TeamNamespace.objects.get(cluster=clusters[cluster], name=ns_name),
                priority_class=PriorityClass.objects.get(name=class_name),
                max_seconds=seconds,
                acting_user=users["admin"],
            )
        # The demo's log is anchored from its first events on (AUDIT_ANCHOR_FILE), not only
        # from beat's first anchor.
        transaction.on_commit(lambda: audit_anchor_write(reason=SOURCE))

        self.stdout.write(
            self.style.SUCCESS(
                "Demo data ready: clusters demo, demo-mig; teams team-a, team-b, team-c.\n"
                "Logins (password 'demo'): admin, admin2 (platform admins), "
                "lead-a, lead-b, lead-c (team leads), viewer (auditor)."
            )
        )
