"""How an amount is written wherever it is read: the pages (the ``amount`` template filter), the
API, the audit log, notifications, the rules' messages, and the digits of Kubernetes quantities.
"""

import re
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from typing import overload

from django import forms, template
from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

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


# A decimal amount inside a text ("2.000/4.000"), not part of a name or version ("v1.2.3").
_AMOUNT_IN_TEXT = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.])")


def amounts_as_written(text: str) -> str:
    """A text written elsewhere (an audit event's stored target, a payload's value) with its
    decimal amounts as format_amount writes them: "2.000/4.000" -> "2/4"."""
    return _AMOUNT_IN_TEXT.sub(lambda m: format_amount(Decimal(m.group(0))), text)


@register.filter(name="amount")
def amount_filter(value: Decimal | int | None) -> str:
    """``{{ value|amount }}``; no amount shows as "" (``|amount|default:"none"``)."""
    return "" if value in (None, "") else format_amount(value)


def rounded(value: Decimal | Fraction | int, places: str) -> Decimal:
    """``value`` (an exact Fraction too) to ``places`` (e.g. "0.01"), half up."""
    if isinstance(value, Fraction):
        value = Decimal(value.numerator) / Decimal(value.denominator)
    return Decimal(value).quantize(Decimal(places), rounding=ROUND_HALF_UP)


def money(value: Decimal | Fraction | int) -> Decimal:
    """An amount of money as shown and answered: two decimals, half up."""
    return rounded(value, "0.01")


def format_money(value: Decimal | Fraction | int | None, currency: str) -> str:
    """``1,234.50 USD``; no amount is "" (the currency's ISO 4217 code after the digits reads
    the same in every language)."""
    if value is None:
        return ""
    return f"{money(value):,} {currency}"


@register.filter(name="money")
def money_filter(value: Decimal | None, currency: str) -> str:
    """``{{ cost|money:currency }}``."""
    return "" if value in (None, "") else format_money(value, currency)


# What an amount is typed as: ASCII digits with an optional fraction (and sign, so that a
# negative one is refused by its range with the range's message). Python's Decimal() would
# also take "3_0" (30), other scripts' digits ("\u0663", 3), exponents and "Infinity".
PLAIN_AMOUNT = re.compile(r"-?[0-9]+(\.[0-9]+)?|-?\.[0-9]+")
NOT_PLAIN_MESSAGE = _("give an amount as plain digits, such as 4 or 0.5, got %(value)r")


def is_plain_amount(text: str) -> bool:
    return PLAIN_AMOUNT.fullmatch(text.strip()) is not None


class AmountInput(forms.TextInput):
    """An amount typed as text (a decimal keypad on phones), not ``type=number``: a number input
    the browser cannot read ("1x2e") is sent as empty and reads back as "", so the server's
    error never names what was typed, a refused form comes back without it, and the request
    form's script took the field for untouched and filled the current value back in."""

    def __init__(self, attrs=None):
        super().__init__({"inputmode": "decimal", "autocomplete": "off", **(attrs or {})})


class AmountFormField(forms.DecimalField):
    """A form's amount: plain ASCII decimals only (``is_plain_amount``), then DecimalField's
    own checks (range, digits); typed as text (AmountInput) so what was typed is what the
    server checks and shows again."""

    widget = AmountInput

    def to_python(self, value):
        if isinstance(value, str) and value.strip() and not is_plain_amount(value):
            raise forms.ValidationError(NOT_PLAIN_MESSAGE, code="invalid", params={"value": value})
        return super().to_python(value)


# For a ModelAdmin's ``formfield_overrides``: its decimal fields (capacities, the cap share,
# budgets) take plain ASCII decimals only, as the portal's own forms do.
PLAIN_DECIMAL_FIELDS = {models.DecimalField: {"form_class": AmountFormField}}


# The units of the resource catalogue a reader meets, in the reader's language; a unit not
# here (GPU, MiB, %) is written as the catalogue has it in every language.
UNIT_WORDS = {
    "slice": pgettext_lazy("unit", "slice"),
    "slices": pgettext_lazy("unit", "slices"),
    "core": pgettext_lazy("unit", "core"),
    "cores": pgettext_lazy("unit", "cores"),
}


@register.filter(name="unit")
def unit_label(unit: str) -> str:
    """A resource's unit as the reader reads it (translated when it is a word);
    ``{{ row.unit|unit }}``."""
    return str(UNIT_WORDS.get(unit, unit))


_DURATION_UNITS = (
    (86400, pgettext_lazy("duration", "%(n)s d")),
    (3600, pgettext_lazy("duration", "%(n)s h")),
    (60, pgettext_lazy("duration", "%(n)s min")),
    (1, pgettext_lazy("duration", "%(n)s s")),
)


def format_duration(seconds: int) -> str:
    """A span of seconds in its two largest units, exactly when they say it all: 86400 -> "1 d",
    5400 -> "1 h 30 min", 90061 -> "1 d 1 h" (the rest is in the seconds shown beside it)."""
    parts, rest = [], int(seconds)
    for size, text in _DURATION_UNITS:
        count, rest = divmod(rest, size)
        if count:
            parts.append(str(text) % {"n": count})
        if len(parts) == 2:
            break
    return " ".join(parts) or str(_DURATION_UNITS[-1][1]) % {"n": 0}
