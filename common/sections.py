"""A page's heaviest section rendered by the Jinja2 backend (templates in jinja2/, their
environment in portal/jinja2.py) and handed to the page's Django template as HTML that is
already escaped. The views of the request list, the dashboard, the cluster overview, the
cross-cluster summary and the audit log use it."""

from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe


def jinja_section(request: HttpRequest, template_name: str, context: dict) -> SafeString:
    html = render_to_string(template_name, context, request=request, using="jinja2")
    return mark_safe(html)  # noqa: S308 - the Jinja2 environment always autoescapes
