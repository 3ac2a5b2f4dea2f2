"""/favicon.ico, which browsers ask for on their own whatever the page links: the static icon,
served from the same file the pages link (static/favicon.ico), so the request never 404s."""

from django.contrib.staticfiles import finders
from django.http import FileResponse, Http404, HttpRequest
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_safe


@require_safe
@cache_control(public=True, max_age=7 * 24 * 3600)
def favicon(request: HttpRequest) -> FileResponse:
    path = finders.find("favicon.ico")
    if not path:
        raise Http404("favicon.ico is missing from the static files")
    return FileResponse(open(path, "rb"), content_type="image/x-icon")
