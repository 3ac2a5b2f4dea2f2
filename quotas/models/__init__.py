"""Data model of quotas: clusters, resources, teams, namespaces and versioned allocations."""

from quotas.models.allocations import Allocation, AllocationVersion
from quotas.models.clusters import Cluster, ClusterCapacity, PriorityClass, Resource
from quotas.models.teams import Team, TeamMembership, TeamNamespace

__all__ = [
    "Allocation",
    "AllocationVersion",
    "Cluster",
    "ClusterCapacity",
    "PriorityClass",
    "Resource",
    "Team",
    "TeamMembership",
    "TeamNamespace",
]
