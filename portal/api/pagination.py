"""Pagination of every API list: ?limit=&offset=, 50 by default, at most 500."""

from rest_framework.pagination import LimitOffsetPagination


class ApiPagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 500
