"""What every FilterSet of the portal shares (approvals/filtersets.py, quotas/filtersets.py).

One FilterSet serves a page and the API list of the same rows: the page shows its errors next to
the filter (``filter_errors``) and answers 400; the API refuses with 400 naming the parameter
(django-filter's DRF backend raises, portal.api.errors renders ``{"message", "extra"}``). Error
messages here read after the parameter's name: ``team: no team 'x' among the teams you may
see``.
"""

from collections.abc import Iterable

import django_filters
from django import forms


def one_of(choices: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The ``invalid_choice`` message of a fixed choice: names every allowed value."""
    allowed = ", ".join(value for value, _ in choices)
    return {"invalid_choice": f"%(value)r is not one of {allowed}"}


class StrictBooleanField(forms.Field):
    """true/false (1/0, and "on" from a checkbox); anything else is an error, not "unset"."""

    widget = forms.CheckboxInput
    TRUE, FALSE = {"true", "1", "on"}, {"false", "0", ""}

    def to_python(self, value):
        if value is None or isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in self.TRUE:
            return True
        if text in self.FALSE:
            return False
        raise forms.ValidationError(
            "%(value)r is not true or false", code="invalid", params={"value": value}
        )


class StrictCheckbox(forms.CheckboxInput):
    """A checkbox whose raw value reaches the field (Django's turns any text into True)."""

    def __init__(self, attrs=None):
        super().__init__(attrs, check_test=self.checked)

    @staticmethod
    def checked(value) -> bool:
        return value is True or str(value).strip().lower() in StrictBooleanField.TRUE

    def value_from_datadict(self, data, files, name):
        return data.get(name)


class StrictBooleanFilter(django_filters.BooleanFilter):
    field_class = StrictBooleanField

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", StrictCheckbox)
        super().__init__(*args, **kwargs)


class PortalFilterSet(django_filters.FilterSet):
    def filter_errors(self) -> list[str]:
        """Every error of the bound filters as ``name: message`` (the page lists them)."""
        if not self.is_bound or self.form.is_valid():
            return []
        return [
            f"{name}: {message}" if name != "__all__" else message
            for name, messages in self.form.errors.items()
            for message in messages
        ]
