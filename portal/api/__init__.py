"""The REST API under /api/v1/: token authentication, error rendering, the URL map."""
