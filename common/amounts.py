"""How an amount is written wherever it is read: the pages (the ``amount`` template filter), the
API, the audit log, notifications, the rules' messages, and the digits of Kubernetes quantities.
"""

from decimal import Decimal
from typing import overload

from django import template

# A template builtin (settings TEMPLATES): ``{{ allocation.cap|amount }}`` on every page.
register = template.Library()


@overload
def format_amount(value: None) -> None: ...


@overload
def format_amount(value: Decimal | int) -> str: ...


def format_amount(value: Decimal | int | None) -> str | None:
    """An amount without trailing zeros or exponent: 10.000 -> "10", 0.50 -> "0.5", 1E+2 ->
    "100", -0 -> "0". None (no amount: no per-pod max) stays None."""
    if value is None:
        return None
    d = value if isinstance(value, Decimal) else Decimal(value)
    if d == 0:
        return "0"  # also turns -0 into 0
    return format(d.normalize(), "f")


@register.filter(name="amount")
def amount_filter(value: Decimal | int | None) -> str:
    """``{{ value|amount }}``; no amount shows as "" (``|amount|default:"none"``)."""
    return "" if value in (None, "") else format_amount(value)
