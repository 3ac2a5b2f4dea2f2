"""Who must decide a request: the pure rules (rules.py) and the clusters' approval policies that
feed them, edited by admins (clusters.py)."""
