"""Label and field selectors of LIST requests (``labelSelector=`` / ``fieldSelector=``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kubesandbox.errors import bad_request

Predicate = Callable[[dict[str, Any]], bool]

_LABEL_TERM_RE = re.compile(
    r"^\s*(?P<neg>!)?\s*(?P<key>[A-Za-z0-9][-A-Za-z0-9_./]*)\s*"
    r"(?:(?P<op>==|!=|=|\s+in\s+|\s+notin\s+)\s*(?P<value>\([^)]*\)|[-A-Za-z0-9_.]*))?\s*$"
)


def _split_terms(selector: str) -> list[str]:
    """Split on commas that are not inside ``( ... )``."""
    terms, depth, current = [], 0, []
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current))
    return [t for t in terms if t.strip()]


def _label_term(term: str) -> Predicate:
    match = _LABEL_TERM_RE.match(term)
    if not match:
        raise bad_request(
            f'unable to parse requirement: found "{term.strip()}", expected: identifier'
        )
    key, negated, op, value = (
        match["key"],
        bool(match["neg"]),
        (match["op"] or "").strip(),
        match["value"],
    )
    if negated:
        if op:
            raise bad_request(f"unable to parse requirement: {term.strip()}")
        return lambda labels: key not in labels
    if not op:
        return lambda labels: key in labels
    if op in ("in", "notin"):
        if not value or not value.startswith("("):
            raise bad_request(f"unable to parse requirement: {term.strip()}: expected '('")
        values = {v.strip() for v in value[1:-1].split(",")}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if value is None:
        value = ""
    if op == "!=":
        return lambda labels: labels.get(key) != value
    return lambda labels: labels.get(key) == value


def label_selector(selector: str | None) -> Predicate | None:
    """Predicate over an object for a label selector (=, ==, !=, in, notin, exists, !exists)."""
    if not selector or not selector.strip():
        return None
    terms = [_label_term(t) for t in _split_terms(selector)]

    def matches(obj: dict[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(term(labels) for term in terms)

    return matches


_FIELD_GETTERS: dict[str, Callable[[dict[str, Any]], str]] = {
    "metadata.name": lambda o: (o.get("metadata") or {}).get("name", ""),
    "metadata.namespace": lambda o: (o.get("metadata") or {}).get("namespace", ""),
}
_EXTRA_FIELDS: dict[str, dict[str, Callable[[dict[str, Any]], str]]] = {
    "Pod": {
        "status.phase": lambda o: (o.get("status") or {}).get("phase", ""),
        "spec.nodeName": lambda o: (o.get("spec") or {}).get("nodeName", ""),
        "spec.schedulerName": lambda o: (o.get("spec") or {}).get("schedulerName", ""),
        "spec.priorityClassName": lambda o: (o.get("spec") or {}).get("priorityClassName", ""),
    },
    "Namespace": {"status.phase": lambda o: (o.get("status") or {}).get("phase", "")},
}


def field_selector(selector: str | None, kind: str) -> Predicate | None:
    """Predicate for a field selector; only the fields kube-apiserver supports for ``kind``."""
    if not selector or not selector.strip():
        return None
    getters = {**_FIELD_GETTERS, **_EXTRA_FIELDS.get(kind, {})}
    checks: list[tuple[Callable[[dict[str, Any]], str], bool, str]] = []
    for term in _split_terms(selector):
        match = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|!=|=)\s*(.*?)\s*$", term)
        if not match:
            raise bad_request(f"invalid selector: '{selector}'; can't understand '{term}'")
        field, op, value = match.groups()
        getter = getters.get(field)
        if getter is None:
            raise bad_request(f"field label not supported: {field}")
        checks.append((getter, op == "!=", value))

    def matches(obj: dict[str, Any]) -> bool:
        return all((getter(obj) == value) != negate for getter, negate, value in checks)

    return matches
