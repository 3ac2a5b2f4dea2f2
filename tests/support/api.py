"""The REST API as a user sees it: a client with a fresh token of that user, a request
body, and the API's routes with the methods each view answers."""

from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from portal.tokens import api_token_create


def as_user(user) -> APIClient:
    _, token = api_token_create(user=user, name="test")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def body(guarantee="3", cap="6", *, submit=True, **line) -> dict:
    return {
        "team": "team-c",
        "justification": "nightly evaluation needs one more card",
        "kind": "permanent",
        "lines": [
            {
                "namespace": "team-c-dev",
                "cluster": "demo",
                "resource": "nvidia.com/gpu",
                "guarantee": guarantee,
                "cap": cap,
                **line,
            }
        ],
        "submit": submit,
    }


SKIP_PREFIXES = ("admin/",)  # Django's own admin


def routes() -> list[tuple[str, str, object, dict]]:
    """(route, name, view callback, default kwargs) of every URL but the Django admin's."""

    def walk(patterns, prefix="", defaults=None):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                route = prefix + str(pattern.pattern)
                if route.startswith(SKIP_PREFIXES):
                    continue
                yield from walk(pattern.url_patterns, route, pattern.default_kwargs)
            elif isinstance(pattern, URLPattern):
                route = prefix + str(pattern.pattern)
                kwargs = {**(defaults or {}), **pattern.default_args}
                yield route, pattern.name or route, pattern.callback, kwargs

    return list(walk(get_resolver().url_patterns))


API = [r for r in routes() if r[0].startswith("api/")]


PAGES = [r for r in routes() if not r[0].startswith("api/")]


def view_methods(callback) -> set[str]:
    cls = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
    if cls is None:
        return {"GET", "POST"}
    return {m.upper() for m in cls.http_method_names if hasattr(cls, m) and m != "options"}
