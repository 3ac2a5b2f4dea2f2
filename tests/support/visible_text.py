"""What a person reads on a page, and the English left in it.

``visible_texts(html)`` gives the page's text nodes outside ``<script>`` and ``<style>`` (the
title and the options of a list included), the attributes a browser shows (``title``,
``placeholder``, ``aria-label``, ``alt``, the ``value`` of a button-like ``<input>``) and the
texts of the plotly figures the page carries in its JSON script element (titles, axis titles,
legend names and titles, hover templates, annotations, bar labels).

``english_runs(texts, names=...)`` finds the runs of Latin-letter words among them that are
neither a name from the data (teams, clusters, namespaces, users, what people typed) nor on
``ALLOWED_WORDS``; identifiers (``nvidia.com/gpu``, ``borrowingLimit``, ``v1``) and the text of
``<code>`` elements (names and machine text as a cluster or the API writes them) are kept as
they are in every language."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from html.parser import HTMLParser

# Words kept in Latin letters in the Chinese pages, and why:
ALLOWED_WORDS = frozenset(
    {
        # Units and formats, written so in Chinese too.
        "GPU",
        "GPUs",
        "vGPU",
        "MIG",
        "CPU",
        "GiB",
        "MiB",
        "API",
        "CSV",
        "YAML",
        "JSON",
        "REST",
        "URL",
        "ID",
        "UTC",
        "CEL",
        "OpenAPI",
        # Kubernetes' own object kinds, as Chinese documentation writes them.
        "Pod",
        "Pods",
        "Job",
        "Jobs",
        # ... and Kueue's and Volcano's (why work waits).
        "Workload",
        "Workloads",
        "PodGroup",
        "PodGroups",
        # Products and projects, by their own names.
        "Kubernetes",
        "Kueue",
        "Volcano",
        "YuniKorn",
        "HAMi",
        "Prometheus",
        "DCGM",
        "NVIDIA",
        "Celery",
        "Django",
        "Swagger",
        # The scheduler backends by the names the cluster settings give them.
        "core",
        "kueue",
        "volcano",
        "yunikorn",
        # The language switch names each language in itself.
        "English",
        # The format a date field expects, as an input's placeholder.
        "YYYY",
        "MM",
        "DD",
        "hh",
        "mm",
    }
)

# What a browser shows of an element's attributes.
_SHOWN_ATTRIBUTES = ("title", "placeholder", "aria-label", "alt")
_BUTTON_INPUTS = {"submit", "button", "reset"}
# Keys of a plotly figure whose string values are drawn: titles, trace names, hover templates
# and annotations' texts ("text" also holds a trace's per-point labels).
_FIGURE_TEXT_KEYS = {"text", "name", "hovertemplate", "texttemplate", "title"}
# A category axis' labels are the trace's x (or y) strings; days and numbers are not words.
_NOT_A_LABEL = re.compile(r"\d{4}-\d{2}-\d{2}([ T][\d:.]+)?Z?\Z|-?[\d.,]+\Z")
_PLOTLY_MARKUP = re.compile(r"%\{[^}]*\}|<[^>]*>")


class _PageText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.texts: list[str] = []
        self.figure_sources: list[str] = []
        self._in: str | None = None  # "script", "style" or "json" while inside one
        self._code = 0  # depth of <code> elements

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "script":
            self._in = "json" if values.get("type") == "application/json" else "script"
        elif tag == "style":
            self._in = "style"
        elif tag == "code":
            self._code += 1
        for name in _SHOWN_ATTRIBUTES:
            if values.get(name):
                self.texts.append(values[name])
        if tag == "input" and values.get("type", "").lower() in _BUTTON_INPUTS:
            self.texts.append(values.get("value", ""))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._in = None
        elif tag == "code":
            self._code = max(0, self._code - 1)

    def handle_data(self, data: str) -> None:
        if self._in == "json":
            self.figure_sources.append(data)
        elif self._in is None and not self._code and data.strip():
            self.texts.append(data)


def figure_texts(value, key: str = "") -> Iterator[str]:
    """The drawn strings of a plotly figure (or of the page's list of charts)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k in ("x", "y") and isinstance(v, list):
                yield from (s for s in v if isinstance(s, str) and not _NOT_A_LABEL.match(s))
            else:
                yield from figure_texts(v, k)
    elif isinstance(value, list):
        for item in value:
            yield from figure_texts(item, key)
    elif isinstance(value, str) and key in _FIGURE_TEXT_KEYS:
        yield _PLOTLY_MARKUP.sub(" ", value)


def figures_of(html: str) -> list[dict]:
    """The plotly figures in the page's JSON script elements."""
    parser = _PageText()
    parser.feed(html)
    figures = []
    for source in parser.figure_sources:
        data = json.loads(source)
        for chart in data if isinstance(data, list) else [data]:
            if isinstance(chart, dict) and "figure" in chart:
                figures.append(chart["figure"])
    return figures


def visible_texts(html: str) -> list[str]:
    parser = _PageText()
    parser.feed(html)
    parser.close()
    texts = list(parser.texts)
    for figure in figures_of(html):
        texts.extend(figure_texts(figure))
    return texts


# A chunk between spaces that is code, not a word: a dotted or slashed name (nvidia.com/gpu,
# spec.hard), camelCase field names and kinds of Kubernetes objects (borrowingLimit,
# ResourceQuota), names with digits (v1, c0, 1g.10gb). Underscored codes (capped_by_share)
# are read as words: a raw code is not for a person to read.
_IDENTIFIER = re.compile(
    r"[\w.-]*[./:@=][\w./:@=-]*[\w]"  # dotted or slashed: nvidia.com/gpu, spec.hard, a=b
    r"|[a-z]+[A-Z]\w*"  # camelCase: borrowingLimit, nominalQuota
    r"|[A-Z][a-z]+[A-Z]\w*"  # a Kubernetes kind: ResourceQuota, ClusterQueue
    r"|\w*\d\w*"  # with digits: v1, c0, 1g
)
_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?")  # noqa: RUF001
_TRIM = "()[]{}<>\"'“”‘’.,;:!?…—–·|，。；：！？（）、《》【】"  # noqa: RUF001


def _words(text: str) -> Iterator[tuple[str, bool]]:
    """(word, flagged) for each Latin word of the text, in order; an identifier ends a run."""
    for chunk in text.split():
        chunk = chunk.strip(_TRIM)
        if not chunk or not re.search(r"[A-Za-z]", chunk):
            yield "", False
            continue
        if _IDENTIFIER.fullmatch(chunk) and "_" not in chunk:
            yield "", False
            continue
        for word in _WORD.findall(chunk):
            yield word, word not in ALLOWED_WORDS


def english_runs(texts: Iterable[str], *, names: Iterable[str] = ()) -> list[str]:
    """Each run of flagged words with the text it stands in ("run" in «text»), once.

    ``names`` (teams, clusters, namespaces, users, what people typed) are taken out of the
    text first, longest first, so that "Team A" or a justification is not read as English."""
    ordered = sorted({n for n in names if n and n.strip()}, key=len, reverse=True)
    found: dict[str, None] = {}
    for text in texts:
        plain = " ".join(text.split())
        for name in ordered:
            plain = plain.replace(name, " ")
        run: list[str] = []
        for word, flagged in [*_words(plain), ("", False)]:
            if flagged:
                run.append(word)
            elif run:
                found[f"{' '.join(run)!r} in «{' '.join(text.split())[:120]}»"] = None
                run = []
    return list(found)
