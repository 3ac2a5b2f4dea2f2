"""The pages of a refused or unknown address (400, 403, 404): the portal's own frame with its
navigation, in the reader's language, saying why where the portal knows (the reason a view
refused with) and where to go next. 500 stays Django's plain template-less answer (500.html):
a failing request may not be able to render the frame."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _

# Django's own text for get_object_or_404 names a model, in English: not a reason to show.
_DJANGO_NOT_FOUND = "matches the given query."


def _reason(exception) -> str:
    """The reason a view gave (its own words, already in the reader's language), else ""."""
    message = exception.args[0] if exception is not None and exception.args else ""
    if not isinstance(message, str) or message.endswith(_DJANGO_NOT_FOUND):
        return ""  # e.g. the URL resolver's dict of patterns tried
    return message


def _page(request: HttpRequest, status: int, title: str, reason: str) -> HttpResponse:
    context = {"status": status, "title": title, "reason": reason}
    return render(request, "error.html", context, status=status)


def bad_request(request: HttpRequest, exception=None) -> HttpResponse:
    return _page(
        request,
        400,
        _("Bad request"),
        _reason(exception) or _("The portal could not read this request."),
    )


def permission_denied(request: HttpRequest, exception=None) -> HttpResponse:
    return _page(
        request,
        403,
        _("Not allowed"),
        _reason(exception) or _("Your account may not open this page."),
    )


def page_not_found(request: HttpRequest, exception=None) -> HttpResponse:
    return _page(
        request,
        404,
        _("Not found"),
        _reason(exception) or _("There is no page at this address."),
    )
