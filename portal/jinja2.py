"""The Jinja2 environment of the templates in jinja2/ (the heaviest tables, rendered by Django's
Jinja2 backend): Django's translations, URL names and static files, as the Django template
language has them.

What a template may use:

- ``_("text")``, ``gettext`` and ``ngettext``: Django's translations. Only ``_("literal")`` is
  found by ``make messages`` (Django's extractor reads the calls spelt that way in any template
  it scans), so a text with values is ``_("peak of %(day)s") % dict(day=...)``, and a plural
  text is made in the view (``ngettext``).
- ``url("name", arg, ...)``: ``reverse``; ``static("path")``: the static file's URL.
- Django's ``|date("Y-m-d H:i")`` (in the current time zone), ``|timesince`` and
  ``|truncatechars(n)``, and the portal's ``|money(currency)`` (``1,234.50 USD``),
  ``|duration`` (seconds as "1 d 2 h") and ``|format_code(name=value)`` (a translated text
  with machine names put in as ``<code>``), beside Jinja2's own filters.
- ``request``, ``csrf_input``, ``csrf_token`` and what the context processors give
  (settings.TEMPLATES), as in every page.

A name the context lacks is an error (StrictUndefined). Autoescaping is on: values are escaped
unless they are safe already (Django's SafeString and forms' widgets say so through
``__html__``).
"""

from django.template import defaultfilters
from django.templatetags.static import static
from django.urls import reverse
from django.utils import translation
from django.utils.timezone import template_localtime
from markupsafe import Markup, escape

from common.amounts import format_duration, format_money
from jinja2 import Environment, StrictUndefined


def url(name: str, *args) -> str:
    return reverse(name, args=args or None)


def date(value, format_string: str) -> str:
    """Django's ``|date``, in the current time zone as the Django template language gives it."""
    return defaultfilters.date(template_localtime(value), format_string)


def format_code(text: str, **names: str) -> Markup:
    """A translated text with machine names (field names, as a cluster spells them) put in
    as ``<code>``: ``_("set %(field)s")|format_code(field="spec.x")``. The text is escaped,
    the names too, each in its element."""
    code = Markup("<code>{}</code>")
    return escape(text) % {k: code.format(v) for k, v in names.items()}


def environment(**options) -> Environment:
    # A name the template misspells is an error (in the tests first), not an empty cell.
    options["undefined"] = StrictUndefined
    # Always escaped (Django's backend asks for it too; said here, whatever the settings say).
    options.pop("autoescape", None)
    env = Environment(autoescape=True, extensions=["jinja2.ext.i18n"], **options)
    env.install_gettext_callables(translation.gettext, translation.ngettext, newstyle=False)
    env.globals.update(url=url, static=static)
    env.filters.update(
        date=date,
        timesince=defaultfilters.timesince_filter,
        truncatechars=defaultfilters.truncatechars,
        money=format_money,
        duration=format_duration,
        format_code=format_code,
    )
    return env
