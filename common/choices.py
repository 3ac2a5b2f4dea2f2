"""Choice labels read cheaply.

Django's ``get_FOO_display()`` builds a dict of the field's choices on every call, hashing each
label: with translated (lazy) labels that translates every label of the field each time, which
made a 25-row list spend milliseconds showing two statuses a row. Models with choice fields
derive from :class:`ChoiceDisplay` instead of ``models.Model``: the same answer from a table
built once per field. Labels stay lazy, so each reader still gets their own language.
"""

from django.db import models
from django.utils.encoding import force_str


def _labels(field) -> dict:
    labels = getattr(field, "_choice_labels", None)
    if labels is None:
        labels = {}
        for value, label in field.flatchoices:
            labels.setdefault(value, label)
        field._choice_labels = labels
    return labels


def choice_labels(model, field_name: str) -> dict:
    """Each choice of the field with its label in the active language (for pages that read
    rows rather than model instances)."""
    return {
        value: str(label) for value, label in _labels(model._meta.get_field(field_name)).items()
    }


class ChoiceDisplay(models.Model):
    class Meta:
        abstract = True

    def _get_FIELD_display(self, field):
        value = getattr(self, field.attname)
        try:
            label = _labels(field)[value]
        except (KeyError, TypeError):  # not a choice, or not hashable: shown as it is
            label = value
        return force_str(label, strings_only=True)
