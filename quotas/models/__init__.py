"""Data model of quotas: clusters, resources, teams, namespaces and versioned allocations."""

from quotas.models.allocations import Allocation, AllocationVersion
from quotas.models.audit import AuditEvent
from quotas.models.clusters import Cluster, ClusterCapacity, PriorityClass, Resource
from quotas.models.suggestions import Suggestion
from quotas.models.sync import (
    DriftEvent,
    ManagedObject,
    SyncLease,
    SyncObjectResult,
    SyncRequest,
    SyncRun,
)
from quotas.models.teams import Team, TeamMembership, TeamNamespace
from quotas.models.usage import PrometheusSource, UsageDaily, UsageSample, UsageSource

__all__ = [
    "Allocation",
    "AllocationVersion",
    "AuditEvent",
    "Cluster",
    "ClusterCapacity",
    "DriftEvent",
    "ManagedObject",
    "PriorityClass",
    "PrometheusSource",
    "Resource",
    "Suggestion",
    "SyncLease",
    "SyncObjectResult",
    "SyncRequest",
    "SyncRun",
    "Team",
    "TeamMembership",
    "TeamNamespace",
    "UsageDaily",
    "UsageSample",
    "UsageSource",
]
