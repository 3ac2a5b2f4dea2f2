"""The API's one parser: JSON with limits, so hostile bodies get 400, never 500.

Python's parser raises RecursionError (not ValueError) on deeply nested input, and happily
returns lone surrogates ("\\ud800") and NUL characters that later break the JSON renderer or
PostgreSQL. The body size is bounded too (API_MAX_BODY_BYTES): DRF reads the raw stream,
around Django's own limit, and no body of the API comes near it; the lists in a body are
bounded by their serializers, before any item is validated.
"""

from django.conf import settings
from django.utils.translation import gettext as _
from rest_framework.parsers import JSONParser
from rest_framework.utils import json

from common.errors import ValidationFailed

# Deeper than any request body of the API (a request's lines' priority classes are depth 4).
MAX_DEPTH = 32


def _path(parent: str, key: object) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else str(key)


def _bad_text(text: str) -> str | None:
    if "\x00" in text:
        return _("must not contain NUL (\\x00) characters")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _("must be valid Unicode (it holds a lone surrogate such as \\ud800)")
    return None


def check_parsed(data: object) -> None:
    """Raise ValidationFailed naming the first value nested too deep or holding bad text."""
    stack: list[tuple[str, object, int]] = [("", data, 1)]
    while stack:
        path, value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                raise ValidationFailed(
                    _("%(field)s: JSON nested deeper than %(depth)s levels")
                    % {"field": path or "body", "depth": MAX_DEPTH},
                    field=path or "body",
                    extra={"code": "too_deep"},
                )
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                child = _path(path, key)
                if isinstance(key, str) and (problem := _bad_text(key)):
                    raise ValidationFailed(
                        _("%(field)s: a key %(problem)s")
                        % {"field": path or "body", "problem": problem},
                        field=path or "body",
                        extra={"code": "invalid_text"},
                    )
                stack.append((child, item, depth + 1))
        elif isinstance(value, str) and (problem := _bad_text(value)):
            field = path or "body"
            raise ValidationFailed(
                _("%(field)s: %(problem)s") % {"field": field, "problem": problem},
                field=field,
                extra={"code": "invalid_text"},
            )


class StrictJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.API_MAX_BODY_BYTES
        raw = b"" if stream is None else stream.read(-1 if limit is None else limit + 1)
        if limit is not None and len(raw) > limit:
            raise ValidationFailed(
                _("body: request body larger than %(limit)s bytes") % {"limit": limit},
                field="body",
                extra={"code": "too_large"},
            )
        encoding = (parser_context or {}).get("encoding") or settings.DEFAULT_CHARSET
        try:
            data = json.loads(raw.decode(encoding), parse_constant=json.strict_constant)
        except RecursionError:
            raise ValidationFailed(
                _("%(field)s: JSON nested deeper than %(depth)s levels")
                % {"field": "body", "depth": MAX_DEPTH},
                field="body",
                extra={"code": "too_deep"},
            ) from None
        except (ValueError, LookupError) as exc:
            raise ValidationFailed(
                _("body: JSON parse error - %(error)s") % {"error": exc},
                field="body",
                extra={"code": "parse_error"},
            ) from None
        check_parsed(data)
        return data
