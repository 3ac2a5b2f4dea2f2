"""Signals quotas sends for other apps to react to (quotas imports none of them)."""

from django.dispatch import Signal

# Sent after a sync run is recorded and committed, with run_id and the ids of the sync
# requests it completed or failed (request_ids).
sync_finished = Signal()
