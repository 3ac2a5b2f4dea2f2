"""The portal's own packages, lowest layer first (each may import only those before it):
what tests/test_dependencies.py checks and what the catalogue test reads for marked strings."""

LAYERS = ("common", "quotas", "usage", "approvals", "overview", "portal")
