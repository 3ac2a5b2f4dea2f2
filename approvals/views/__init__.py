"""Pages of the request workflow: the list, a request, its form and preview, and the
suggestions turned into requests."""
