"""What every FilterSet of the portal shares (approvals/filtersets.py, quotas/filtersets.py).

One FilterSet serves a page and the API list of the same rows: the page shows its errors next to
the filter (``filter_errors``) and answers 400; the API refuses with 400 naming the parameter
(django-filter's DRF backend raises, portal.api.errors renders ``{"message", "extra"}``). Error
messages here read after the parameter's name: ``team: no team 'x' among the teams you may
see``.
"""

from collections.abc import Iterable
from datetime import datetime, time
from functools import cached_property
from pathlib import Path

import django.forms
import django_filters
from django import forms
from django.conf import settings
from django.forms.renderers import Jinja2 as Jinja2Renderer
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from django.utils.text import format_lazy
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from drf_spectacular.utils import extend_schema_field


def one_of(choices: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The ``invalid_choice`` message of a fixed choice: names every allowed value."""
    allowed = ", ".join(value for value, _ in choices)
    # Lazy: the fields are made at import, the message is rendered in the request's language.
    return {
        "invalid_choice": format_lazy(
            gettext_lazy("%(value)r is not one of {allowed}"), allowed=allowed
        )
    }


class StrictBooleanField(forms.Field):
    """true/false (1/0, and "on" from a checkbox); anything else is an error, not "unset".
    Sent empty it is not given (None), as every optional filter: ``?restored=`` lists all."""

    widget = forms.CheckboxInput
    TRUE, FALSE = {"true", "1", "on"}, {"false", "0"}

    def to_python(self, value):
        if value is None or isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if not text:
            return None
        if text in self.TRUE:
            return True
        if text in self.FALSE:
            return False
        raise forms.ValidationError(
            _("%(value)r is not true or false"), code="invalid", params={"value": value}
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


class ReadOnceChoiceIterator(django_filters.fields.ModelChoiceIterator):
    """A model filter's choices, read with one plain query when its select is drawn. Django's
    iterator reads them through ``QuerySet.iterator()``, on PostgreSQL a server-side cursor:
    a DECLARE, FETCH and CLOSE round trip for a select of a few teams. The form, and so its
    field's queryset, lives for one request."""

    def __iter__(self):
        if self.field.empty_label is not None:
            yield ("", self.field.empty_label)
        if self.field.null_label is not None:
            yield (self.field.null_value, self.field.null_label)
        for obj in self.queryset:
            yield self.choice(obj)


class ReadOnceModelChoiceField(django_filters.fields.ModelChoiceField):
    iterator = ReadOnceChoiceIterator


class ModelChoiceFilter(django_filters.ModelChoiceFilter):
    """django-filter's ModelChoiceFilter, its choices read once (ReadOnceChoiceIterator)."""

    field_class = ReadOnceModelChoiceField


class FilterWidgetRenderer(Jinja2Renderer):
    """The filter forms' widgets (selects of every status, team and cluster) drawn from
    Django's own Jinja2 widget templates (the same HTML, in a fraction of the Django template
    language's time), but for the select, which the portal's jinja2/ directory writes with its
    options in place."""

    @cached_property
    def engine(self):
        return self.backend(
            {
                "APP_DIRS": False,
                "DIRS": [
                    settings.BASE_DIR / "jinja2",
                    Path(django.forms.__file__).parent / self.backend.app_dirname,
                ],
                "NAME": "filterwidgets",
                "OPTIONS": {},
            }
        )


# One renderer, its engine made once per process.
FILTER_WIDGETS = FilterWidgetRenderer()


class PortalFilterSet(django_filters.FilterSet):
    def get_form_class(self):
        # A filter of one value given twice (?team=a&team=b) is refused, naming it: reading
        # only the last would answer a question the client did not ask.
        base = super().get_form_class()

        class OnceForm(base):
            default_renderer = FILTER_WIDGETS

            def clean(self):
                cleaned = super().clean()
                for name, field in self.fields.items():
                    if getattr(field.widget, "allow_multiple_selected", False):
                        continue
                    count = len(self.data.getlist(name)) if hasattr(self.data, "getlist") else 0
                    if count > 1:
                        self.add_error(
                            name,
                            forms.ValidationError(
                                _("give it once, got %(count)d values"),
                                code="repeated",
                                params={"count": count},
                            ),
                        )
                return cleaned

        OnceForm.__name__ = base.__name__
        return OnceForm

    def filter_errors(self) -> list[str]:
        """Every error of the bound filters as ``name: message`` (the page lists them)."""
        if not self.is_bound or self.form.is_valid():
            return []
        return [
            f"{name}: {message}" if name != "__all__" else message
            for name, messages in self.form.errors.items()
            for message in messages
        ]


class MomentField(forms.CharField):
    """An ISO 8601 time, or a day alone: its start, or its end with ``end_of_day`` (so that
    ``until=2026-01-31`` takes the whole day). A time without an offset is the portal's."""

    def __init__(self, *, end_of_day: bool = False, **kwargs):
        self.end_of_day = end_of_day
        super().__init__(**kwargs)

    def to_python(self, value):
        text = super().to_python(value)
        if not text:
            return None
        try:
            # A day alone first: fromisoformat (under parse_datetime) reads it as its midnight.
            if (day := parse_date(text)) is not None:
                moment = datetime.combine(day, time.max if self.end_of_day else time.min)
            else:
                moment = parse_datetime(text)
        except ValueError:  # well formed, but no such day or time (2026-02-30)
            moment = None
        if moment is None:
            raise forms.ValidationError(
                _("give a time as ISO 8601 (2026-01-31T12:00:00Z) or a day, got %(value)r"),
                code="invalid",
                params={"value": text},
            )
        if timezone.is_naive(moment):
            moment = timezone.make_aware(moment, timezone.get_default_timezone())
        return moment


@extend_schema_field(
    {
        "type": "string",
        "example": "2026-01-31T12:00:00Z",
        "description": "An ISO 8601 time, or a day (YYYY-MM-DD).",
    }
)
class MomentFilter(django_filters.Filter):
    field_class = MomentField


def period_form(start: str, end: str, *, max_days: int | None = None) -> type[forms.Form]:
    """The form of a FilterSet with a period: an ``end`` before ``start`` (or more than
    ``max_days`` after it) is an error of ``end``, as a bad value of it would be."""

    class PeriodForm(forms.Form):
        def clean(self):
            cleaned = super().clean()
            first, last = cleaned.get(start), cleaned.get(end)
            if first is None or last is None:
                return cleaned
            if last < first:
                self.add_error(
                    end,
                    forms.ValidationError(
                        _("must not be before %(start)s"), params={"start": start}
                    ),
                )
            elif max_days is not None and (last - first).days >= max_days:
                self.add_error(
                    end,
                    forms.ValidationError(
                        _("at most %(days)s days from %(start)s"),
                        params={"days": max_days, "start": start},
                    ),
                )
            return cleaned

    return PeriodForm
