"""The API's JSON renderer: DRF's bytes, written by orjson.

DRF's ``JSONRenderer`` writes through the standard library's encoder: 3.0 ms of the 45 of a
500-request page of ``GET /api/v1/requests/`` (in process). orjson writes the same compact
UTF-8 JSON (keys in order, the same escapes) in 0.7 ms. What it does not write the way DRF
does is handed to DRF's own encoder: moments (DRF writes UTC as "Z"), decimals, lazy
translations and anything else DRF's ``JSONEncoder.default`` knows; U+2028 and U+2029 are
escaped afterwards as DRF escapes them. An indented answer (``Accept: application/json;
indent=4``, the browsable API) is DRF's own, and so is what orjson cannot write (integers
beyond 64 bits). Tests hold both renderers to the same bytes. Two spellings differ, no value: a
number below 1e-4 (orjson's 0.000025 for DRF's 2.5e-05, the same number), and a float that is
not a number, which DRF refuses (a server error) and orjson writes as null.
"""

from __future__ import annotations

import orjson
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.encoders import JSONEncoder

_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_NON_STR_KEYS
_LINE_SEPARATOR = "\u2028".encode()
_PARAGRAPH_SEPARATOR = "\u2029".encode()
_drf_default = JSONEncoder().default


class ApiJSONRenderer(JSONRenderer):
    def render(self, data, accepted_media_type=None, renderer_context=None):
        if data is None:
            return b""
        indent = self.get_indent(accepted_media_type, renderer_context or {})
        if indent is not None or self.ensure_ascii or not self.compact:
            return super().render(data, accepted_media_type, renderer_context)
        # What DRF's encoder turned into something orjson writes, by the object's identity
        # (the object kept alive with it): DRF's writing of the same data, when orjson gives
        # up half-way, finds a generator it already read.
        converted: dict[int, tuple[object, object]] = {}

        def default(obj):
            value = _drf_default(obj)
            converted[id(obj)] = (obj, value)
            return value

        try:
            written = orjson.dumps(data, default=default, option=_OPTIONS)
        except orjson.JSONEncodeError:
            # What orjson cannot write (an integer beyond 64 bits, a lone surrogate): DRF's
            # answer, or DRF's refusal, by a renderer of its own (this one is left as it was).
            fallback = JSONRenderer()
            fallback.encoder_class = _encoder_with(converted)
            return fallback.render(data, accepted_media_type, renderer_context)
        if b"\xe2\x80" in written:
            written = written.replace(_LINE_SEPARATOR, b"\\u2028").replace(
                _PARAGRAPH_SEPARATOR, b"\\u2029"
            )
        return written


def _encoder_with(converted: dict[int, tuple[object, object]]) -> type[JSONEncoder]:
    class Encoder(JSONEncoder):
        def default(self, obj):
            found = converted.get(id(obj))
            return found[1] if found is not None else super().default(obj)

    return Encoder
