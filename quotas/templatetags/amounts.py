"""Amounts in templates as everywhere else (quotas.rules.fmt):
``{% load amounts %}{{ a.cap|amount }}`` gives "10", "0.5"; an empty amount an en dash."""

from decimal import Decimal

from django import template

from quotas.rules import fmt

register = template.Library()

EMPTY = "\u2013"


@register.filter
def amount(value: Decimal | int | None) -> str:
    if value is None or value == "":
        return EMPTY
    return fmt(value)
