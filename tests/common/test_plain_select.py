"""The filter forms' <select> written in Python is the markup Django's template writes."""

import pytest
from django import forms
from django.test.html import parse_html

from common.filtersets import PlainSelect


class Form(forms.Form):
    choice = forms.ChoiceField(
        choices=[("", "all <teams>"), ("a", "A & B"), ("b", "B"), ("a", "A again")],
        required=False,
        help_text="Which one.",
    )


@pytest.mark.parametrize("data", [{}, {"choice": "a"}, {"choice": "b"}, {"choice": "nope"}])
def test_same_markup_as_djangos_select(data):
    form = Form(data)
    form.is_valid()
    django_html = str(form["choice"])
    form.fields["choice"].widget.__class__ = PlainSelect
    plain_html = str(form["choice"])
    assert parse_html(plain_html) == parse_html(django_html)
    assert plain_html.count(" selected") == (0 if data.get("choice") == "nope" else 1)


def test_groups_are_left_to_django():
    widget = PlainSelect(choices=[("Group", [("x", "X")]), ("y", "Y")])
    html = widget.render("g", "x")
    assert "<optgroup" in html and "selected" in html
