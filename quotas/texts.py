"""Messages kept as their English msgid and named parameters, rendered in the reader's language.

A message that outlives the request that made it (a quota request's findings, stored as JSON) is
rendered when it is shown, not when it is made: a :class:`Text` keeps the msgid (written with
``gettext_noop`` so ``makemessages`` collects it) and its parameters, and
``str()`` renders it in the active language. A parameter may itself be a Text, or a tuple of
Texts (a list, joined the way the language joins one). Stored form: :meth:`Text.to_json`.
A text may carry a context (``pgettext``'s): makemessages has no ``pgettext`` no-op, so such a
msgid must be collected where it is written with its context too (common.amounts' unit words).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.utils import translation
from django.utils.translation import gettext, gettext_noop, pgettext

# Translators: joins a list of clauses ("a; b"); Chinese uses a full-width semicolon.
LIST_SEPARATOR = gettext_noop("; ")


@dataclass(frozen=True)
class Text:
    msgid: str
    params: tuple[tuple[str, Any], ...] = ()
    context: str = ""

    @classmethod
    def of(cls, msgid: str, /, **params: Any) -> Text:
        return cls(msgid, tuple(sorted(params.items())))

    def __str__(self) -> str:
        translated = pgettext(self.context, self.msgid) if self.context else gettext(self.msgid)
        if not self.params:
            return translated
        values = {name: _render(value) for name, value in self.params}
        try:
            return translated % values
        except (KeyError, TypeError, ValueError):
            # A catalogue whose translation names other placeholders: the English wording.
            return self.msgid % values

    def english(self) -> str:
        with translation.override("en"):
            return str(self)

    def to_json(self) -> dict:
        stored = {
            "msgid": self.msgid,
            "params": {name: _value_json(value) for name, value in self.params},
        }
        if self.context:
            stored["context"] = self.context
        return stored

    @classmethod
    def from_json(cls, data: Mapping) -> Text:
        params = data.get("params") or {}
        return cls(
            str(data["msgid"]),
            tuple(sorted((str(k), _value_from_json(v)) for k, v in params.items())),
            str(data.get("context") or ""),
        )


def _render(value: Any) -> Any:
    if isinstance(value, Text):
        return str(value)
    if isinstance(value, tuple):
        return gettext(LIST_SEPARATOR).join(str(_render(v)) for v in value)
    return value


def _value_json(value: Any) -> Any:
    if isinstance(value, Text):
        return {"text": value.to_json()}
    if isinstance(value, tuple):
        return {"list": [_value_json(v) for v in value]}
    return value


def _value_from_json(value: Any) -> Any:
    if isinstance(value, dict) and "text" in value:
        return Text.from_json(value["text"])
    if isinstance(value, dict) and "list" in value:
        return tuple(_value_from_json(v) for v in value["list"])
    return value


def stored_text(text: Text) -> dict:
    """A text as JSON keeps it: its English wording (what a reader without the catalogue, or
    an older portal, shows) and the text it is rendered from again (:func:`stored_message`)."""
    return {"message": text.english(), "text": text.to_json()}


def stored_json(value: Any) -> Any:
    """``value`` (a JSON-able structure whose leaves may be Texts) with every Text stored as
    :func:`stored_text` keeps it."""
    if isinstance(value, Text):
        return stored_text(value)
    if isinstance(value, Mapping):
        return {k: stored_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [stored_json(v) for v in value]
    return value


def stored_value(value: Any) -> Any:
    """A stored JSON value in the active language: a stored text (:func:`stored_text`) as its
    message, anything else (a plain string of older rows, a number) as it is."""
    if isinstance(value, Mapping) and "message" in value:
        return stored_message(value)
    return value


def stored_message(data: Mapping) -> str:
    """A stored message ({"message", "text"}) in the active language: rendered again from its
    text when it has one, else (stored before texts were kept) as it was stored."""
    text = data.get("text")
    if isinstance(text, Mapping) and "msgid" in text:
        try:
            return str(Text.from_json(text))
        except (KeyError, TypeError, ValueError):
            pass
    return str(data.get("message", ""))


def localized_messages(rows: Iterable[Mapping]) -> list[dict]:
    """Stored rows ({"message", "text", ...}) with ``message`` in the active language and
    without ``text`` (the form answers and pages show)."""
    return [
        {**{k: v for k, v in row.items() if k != "text"}, "message": stored_message(row)}
        for row in rows
        if isinstance(row, Mapping)
    ]
