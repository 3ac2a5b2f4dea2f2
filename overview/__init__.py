"""The pages that read across the apps: the dashboard, the clusters and the plan summary."""
