"""The audit chain: events linked by hashes (chain.py), anchors written outside the database
(anchors.py), the database grants that keep it append-only (grants.py), labels for its pages
(labels.py), the audit log page (views.py) and API (api.py)."""
