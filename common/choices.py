"""Choice labels for pages that read rows rather than model instances."""


def choice_labels(model, field_name: str) -> dict:
    """Each choice of the field with its label in the active language: read once for a page,
    then looked up per row (a row has no ``get_FOO_display()``)."""
    return {value: str(label) for value, label in model._meta.get_field(field_name).flatchoices}
