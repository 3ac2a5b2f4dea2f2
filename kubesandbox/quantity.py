"""Kubernetes resource quantities (``500m``, ``16Gi``, ``4``) as exact numbers.

The schemas check the grammar; the rules of the API server and of the admission webhooks need the
value: non-negative, whole numbers for extended resources, ``min <= max`` and sums.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from kubesandbox.schemas import QUANTITY_RE

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}


class QuantityError(ValueError):
    """Not a Kubernetes quantity."""


def parse_quantity(value: Any) -> Fraction:
    """The exact value of a quantity given as a string or a JSON number."""
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    if not isinstance(value, str) or not QUANTITY_RE.match(value):
        raise QuantityError(f"not a quantity: {value!r}")
    text = value
    for suffix, factor in _BINARY.items():
        if text.endswith(suffix):
            return Fraction(text[: -len(suffix)]) * factor
    lowered = text.lower()
    if "e" in lowered and not text.endswith("E"):
        mantissa, _, exponent = lowered.partition("e")
        return Fraction(mantissa) * Fraction(10) ** int(exponent)
    suffix = text[-1] if text[-1] in _DECIMAL and not text[-1].isdigit() else ""
    number = text[: -len(suffix)] if suffix else text
    return Fraction(number) * _DECIMAL[suffix]


def quantity_or_none(value: Any) -> Fraction | None:
    try:
        return parse_quantity(value)
    except (QuantityError, ValueError, ZeroDivisionError):
        return None


def format_milli(value: Fraction) -> str:
    """A value as a canonical-enough quantity string (whole units or milli-units)."""
    if value.denominator == 1:
        return str(value.numerator)
    milli = value * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return f"{float(value):g}"
