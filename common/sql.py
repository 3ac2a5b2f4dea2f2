"""What the portal's few hand-written queries share (the plan check's reads: quotas.selectors
allocation_facts_of, approvals.budgets holding_lines). They are written in SQL that
PostgreSQL and SQLite both take, and answer what the ORM would."""

from decimal import Context, Decimal

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
