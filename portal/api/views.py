"""The API's own pages: the root (/api/v1/) listing every endpoint, and the docs page."""

import re
from typing import ClassVar

from django.conf import settings
from django.http import JsonResponse
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import translation
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema, inline_serializer
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework import permissions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api.renderers import ApiJSONRenderer

API_PREFIX = "api/v1/"
_CONVERTER = re.compile(r"<(?:\w+:)?(\w+)>")


def _walk(patterns, prefix: str = ""):
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _walk(pattern.url_patterns, route)
        elif isinstance(pattern, URLPattern):
            yield route, pattern


def api_endpoints() -> list[dict]:
    """Every endpoint under /api/v1/: its path (``{id}`` for parameters), name and methods."""
    found = []
    for route, pattern in _walk(get_resolver().url_patterns):
        if not route.startswith(API_PREFIX) or route == API_PREFIX:
            continue
        view = getattr(pattern.callback, "cls", None)
        if view is None:
            continue
        methods = [m.upper() for m in view.http_method_names if m != "options" and hasattr(view, m)]
        # As in the schema: a primary key is {id}.
        path = "/" + _CONVERTER.sub(lambda m: "{id}" if m[1] == "pk" else f"{{{m[1]}}}", route)
        found.append({"path": path, "name": pattern.name, "methods": methods})
    return found


@csrf_exempt  # it changes nothing; CSRF's HTML 403 would hide the JSON 404 from writes
def api_not_found(request, unmatched: str = "") -> JsonResponse:
    """Any other path under /api/v1/: a 404 in the API's shape, not Django's HTML page (an id
    the URL does not take, such as -1, never reaches a view)."""
    return JsonResponse(
        {
            "message": f"no API endpoint at {request.path}; GET /api/v1/ lists them",
            "extra": {"code": "not_found"},
        },
        status=404,
    )


class ApiEndpointSerializer(serializers.Serializer):
    path = serializers.CharField()
    name = serializers.CharField()
    methods = serializers.ListField(child=serializers.CharField())


class ApiRoot(APIView):
    """GET /api/v1/: every endpoint of the API, and where its schema and docs are."""

    permission_classes = [permissions.AllowAny]

    @extend_schema(
        summary="List the API's endpoints",
        tags=["api"],
        responses=inline_serializer(
            "ApiRoot",
            {
                "schema": serializers.URLField(),
                "docs": serializers.URLField(),
                "endpoints": ApiEndpointSerializer(many=True),
            },
        ),
    )
    def get(self, request: Request) -> Response:
        return Response(
            {
                "schema": request.build_absolute_uri(reverse("api-schema")),
                "docs": request.build_absolute_uri(reverse("api-docs")),
                "endpoints": api_endpoints(),
            }
        )


class _ErrorsAsJson:
    """Refusals (a bad ?format=, throttling) in the API's one error shape, as JSON, not as a
    YAML schema document or an HTML page."""

    def finalize_response(self, request, response, *args, **kwargs):
        if response.status_code >= 400:
            request.accepted_renderer = ApiJSONRenderer()
            request.accepted_media_type = ApiJSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)


class ApiSchema(_ErrorsAsJson, SpectacularAPIView):
    """The OpenAPI 3 document: YAML by default, JSON with ?format=json or Accept.

    The document is a function of the code, the settings and the language alone: it is public
    (SERVE_PUBLIC), listing every operation whoever asks, and no view's schema reads the
    database or the user. So each process builds it once per language of the portal (100 to
    700 ms of generation, on a URL anyone may ask) and renders it for every request; another
    ``?lang=`` or a ``?version=`` is built for its request only."""

    _documents: ClassVar[dict[str, dict]] = {}

    def _get_schema_response(self, request):
        version = self.api_version or request.version or self._get_version_parameter(request)
        language = translation.get_language()
        kept = version is None and language in dict(settings.LANGUAGES)
        document = self._documents.get(language) if kept else None
        if document is None:
            generator = self.generator_class(
                urlconf=self.urlconf, api_version=version, patterns=self.patterns
            )
            document = generator.get_schema(request=request, public=self.serve_public)
            if kept:
                self._documents[language] = document
        return Response(
            data=document,
            headers={
                "Content-Disposition": f'inline; filename="{self._get_filename(request, version)}"'
            },
        )


class ApiDocs(_ErrorsAsJson, SpectacularSwaggerView):
    """Swagger UI with our template: no inline script or style (the CSP forbids them)."""

    template_name = "api/swagger_ui.html"
    url_name = "api-schema"
    title = "GPU quota portal API"
