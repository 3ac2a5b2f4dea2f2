"""REST API of quotas: teams, allocations, clusters and plan findings (read-only)."""
