"""REST API of quota requests: list, read, create, and one endpoint per transition."""
