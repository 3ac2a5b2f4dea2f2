"""One way to write an amount: the function, and the template filter every page uses."""

from decimal import Decimal as D

import pytest
from django.template import Context, Template

from common.amounts import format_amount


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (D("10.000"), "10"),
        (D("0.500"), "0.5"),
        (D("100"), "100"),
        (D("1E+2"), "100"),
        (D("-0.000"), "0"),
        (D("-2.50"), "-2.5"),
        (D("5.328"), "5.328"),
        (D("0.001"), "0.001"),
        (7, "7"),
    ],
)
def test_trailing_zeros_and_exponents_are_dropped(value, text):
    assert format_amount(value) == text


def test_no_amount_stays_none():
    assert format_amount(None) is None


@pytest.mark.parametrize(
    ("value", "shown"),
    [(D("16.000"), "16"), (D("1E+1"), "10"), (D("0.250"), "0.25"), (None, "none")],
)
def test_every_template_has_the_amount_filter(value, shown):
    # No {% load %}: the filter is a template builtin (settings TEMPLATES).
    template = Template('{{ value|amount|default:"none" }}')
    assert template.render(Context({"value": value})) == shown
