"""Pages of the overview app: the dashboard (home) and the clusters with the plan summary."""
