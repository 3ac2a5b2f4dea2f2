"""What the portal's hand-written queries share (the reads of the busiest pages and of the plan
check, where the ORM took longer to build a query than the database to answer it: e.g.
quotas.selectors allocation_facts_of, approvals.selectors requests_listed, the dashboard's in
overview). They are written in SQL that PostgreSQL and SQLite both take, and answer what the
ORM would."""

import json
from datetime import date, datetime
from decimal import Context, Decimal

from django.conf import settings
from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

_SQLITE_DECIMAL = Context(prec=15)


def in_list(values: list) -> str:
    """``IN (%s, ...)``: as many placeholders as values (give at least one)."""
    if not values:
        raise ValueError("IN () of no value")
    return f"IN ({', '.join(['%s'] * len(values))})"


def db_decimal(value) -> Decimal | None:
    """An amount as the database answers a column or an expression over amount columns (a
    sum, a maximum): a Decimal on PostgreSQL; on SQLite an int or a float, made a Decimal of
    its 15 significant digits as Django's ORM makes it (the float's noise dropped)."""
    if value is None or isinstance(value, Decimal):
        return value
    return _SQLITE_DECIMAL.create_decimal_from_float(float(value))


def db_json(value):
    """A JSON column as the database answers it to a hand-written query: its text (Django
    reads jsonb as text on PostgreSQL, SQLite stores text), parsed; None stays None."""
    return json.loads(value) if isinstance(value, str) else value


def db_moment(value) -> datetime | None:
    """A moment as the database answers a timestamp column: aware on PostgreSQL; on SQLite
    a naive time in the connection's zone (or its text), made aware as Django's ORM makes it."""
    if value is None:
        return None
    if isinstance(value, str):
        value = parse_datetime(value)
    if settings.USE_TZ and timezone.is_naive(value):
        value = timezone.make_aware(value, connection.timezone)
    return value


def db_date(value) -> date | None:
    """A day as the database answers it: a date, or on SQLite where the column's type is not
    known to the driver (a subquery's answer) its text."""
    return parse_date(value) if isinstance(value, str) else value


def tables(**models) -> dict[str, str]:
    """``{name: model's table}``, to write into a query's text (no value is)."""
    return {name: model._meta.db_table for name, model in models.items()}
