"""Data model of quotas: clusters, resources, teams, namespaces, versioned allocations, the
cluster sync and the audit chain."""

from quotas.models.allocations import (
    MAX_RUN_TIME_SECONDS,
    Allocation,
    AllocationVersion,
    RunTimeLimit,
)
from quotas.models.audit import AuditEvent
from quotas.models.clusters import Cluster, ClusterCapacity, PriorityClass, Resource
from quotas.models.sync import (
    DriftEvent,
    ManagedObject,
    SyncLease,
    SyncObjectResult,
    SyncRequest,
    SyncRun,
)
from quotas.models.teams import Team, TeamMembership, TeamNamespace

__all__ = [
    "MAX_RUN_TIME_SECONDS",
    "Allocation",
    "AllocationVersion",
    "AuditEvent",
    "Cluster",
    "ClusterCapacity",
    "DriftEvent",
    "ManagedObject",
    "PriorityClass",
    "Resource",
    "RunTimeLimit",
    "SyncLease",
    "SyncObjectResult",
    "SyncRequest",
    "SyncRun",
    "Team",
    "TeamMembership",
    "TeamNamespace",
]
