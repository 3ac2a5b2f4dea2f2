"""Pagination of every API list: ``?page=N&page_size=M``, 50 a page by default, at most
``API_MAX_PAGE_SIZE`` (500), answered as ``{"count", "next", "previous", "results"}``.

Bad values are refused naming the parameter (never silently replaced): ``page`` or ``page_size``
that is not a positive integer, or ``page_size`` above the maximum, is a 400; a page past the
last is a 404. ``limit``/``offset`` (the style before this one; no documented client used it)
are a 400 that says what to send instead, so a client still sending them learns it at once
rather than reading the first page over and over.
"""

from django.conf import settings
from django.core.paginator import InvalidPage
from django.utils.translation import gettext as _
from rest_framework.pagination import PageNumberPagination

from common.errors import ApplicationError, ValidationFailed

DEFAULT_PAGE_SIZE = 50


class PageNotFound(ApplicationError):
    status_code = 404


def _positive_int(params, name: str) -> int | None:
    text = params.get(name)
    if text is None:
        return None
    if len(params.getlist(name)) > 1:
        raise ValidationFailed(
            _("%(field)s: give it once, got %(count)s values")
            % {"field": name, "count": len(params.getlist(name))},
            field=name,
            extra={"code": "repeated"},
        )
    text = text.strip()
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise ValidationFailed(
            _("%(field)s: must be a positive integer, got %(value)s")
            % {"field": name, "value": repr(text)},
            field=name,
            extra={"code": "invalid"},
        )
    return int(text)


class ApiPagination(PageNumberPagination):
    page_size = DEFAULT_PAGE_SIZE
    page_size_query_param = "page_size"
    page_query_description = "Page number, from 1 (a page past the last is a 404)."

    @property
    def max_page_size(self) -> int:
        return settings.API_MAX_PAGE_SIZE

    @property
    def page_size_query_description(self) -> str:
        return (
            f"Rows per page: {DEFAULT_PAGE_SIZE} unless given, at most {self.max_page_size} "
            "(more is a 400)."
        )

    def get_page_size(self, request) -> int:
        size = _positive_int(request.query_params, self.page_size_query_param)
        if size is None:
            return self.page_size
        if size > self.max_page_size:
            raise ValidationFailed(
                _("page_size: at most %(max)s, got %(size)s")
                % {"max": self.max_page_size, "size": size},
                field="page_size",
                extra={"code": "max_value", "max": self.max_page_size},
            )
        return size

    def paginate_queryset(self, queryset, request, view=None):
        return list(self._page(queryset, request))

    def paginate_rows(self, queryset, request, rows):
        """The page's rows as ``rows(sliced queryset)`` reads them (e.g. ``.values(...)``): the
        count is of ``queryset`` itself, without the joins the rows need."""
        return list(rows(self._page(queryset, request).object_list))

    def _page(self, queryset, request):
        for old in ("limit", "offset"):
            if old in request.query_params:
                raise ValidationFailed(
                    _(
                        "%(field)s: not supported; lists are paged with page and page_size "
                        "(at most %(max)s)"
                    )
                    % {"field": old, "max": self.max_page_size},
                    field=old,
                    extra={"code": "unsupported"},
                )
        number = _positive_int(request.query_params, self.page_query_param) or 1
        self.request = request
        paginator = self.django_paginator_class(queryset, self.get_page_size(request))
        try:
            self.page = paginator.page(number)
        except InvalidPage:
            raise PageNotFound(
                _("page: no page %(number)s; the last is %(last)s")
                % {"number": number, "last": paginator.num_pages},
                field="page",
                extra={"code": "not_found", "pages": paginator.num_pages},
            ) from None
        return self.page

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            parameter["schema"]["minimum"] = 1
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"]["maximum"] = self.max_page_size
        return parameters

    def get_paginated_response_schema(self, schema):
        body = super().get_paginated_response_schema(schema)
        body["required"] = ["count", "next", "previous", "results"]
        for name in ("next", "previous"):
            body["properties"][name]["example"] = (
                f"https://portal.example.org/api/v1/requests/?page={3 if name == 'next' else 1}"
            )
        return body
