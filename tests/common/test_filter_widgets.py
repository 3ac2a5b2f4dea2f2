"""The filter forms' select (jinja2/django/forms/widgets/select.html, its options written in
place) draws the very HTML of Django's own Jinja2 select, whatever the choices, groups, values
and attributes."""

import pytest
from django import forms
from django.forms.renderers import Jinja2

from common.filtersets import FILTER_WIDGETS

DJANGOS = Jinja2()

ODD = [("", "all"), ("a&b", 'Team "A" & <B>'), ("x", "x"), (3, "three")]
GROUPED = [
    ("", "none"),
    ("Training", [("t1", "train one"), ("t2", "train <two>")]),
    ("Serving", [("s1", "serve")]),
]


@pytest.mark.parametrize(
    "widget, value, attrs",
    [
        (forms.Select(choices=ODD), "a&b", {"id": "id_team", "aria-describedby": "h"}),
        (forms.Select(choices=ODD), None, {"id": "id_team", "required": True, "disabled": False}),
        (forms.Select(choices=ODD), 3, {"class": 'odd "one"'}),
        (forms.Select(choices=GROUPED), "t2", {"id": "id_g"}),
        (forms.SelectMultiple(choices=ODD), ["x", "a&b"], {"id": "id_m"}),
        (forms.NullBooleanSelect(), True, {"id": "id_nb"}),
        (forms.Select(choices=[]), None, None),
    ],
)
def test_the_filter_select_draws_djangos_html(widget, value, attrs):
    ours = widget.render("name", value, attrs, renderer=FILTER_WIDGETS)
    assert ours == widget.render("name", value, attrs, renderer=DJANGOS)
    assert ours.startswith('<select name="name"')


def test_only_the_select_is_the_portals_own():
    assert FILTER_WIDGETS.get_template("django/forms/widgets/select.html").origin.name.endswith(
        "jinja2/django/forms/widgets/select.html"
    )
    assert "/django/forms/jinja2/" in (
        FILTER_WIDGETS.get_template("django/forms/widgets/input.html").origin.name
    )
