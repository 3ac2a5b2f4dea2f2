"""API plumbing every app's API views use: paging, the error schema, idempotency."""
