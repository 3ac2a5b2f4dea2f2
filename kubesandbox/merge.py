"""The PATCH flavours other than server-side apply: JSON merge patch (RFC 7386), strategic merge
patch (as far as the portal's kinds need it) and JSON patch (RFC 6902).

All functions return new objects and leave their inputs untouched.
"""

from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    """The patch cannot be applied to the object (answered as 422)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: maps merge recursively, ``null`` deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Strategic merge patch with the directives kubectl sends for maps.

    Maps merge, ``null`` deletes, lists are replaced as a whole (the sandbox does not know the patch
    merge keys of lists), ``$patch: delete|replace|merge``, ``$retainKeys`` and
    ``$deleteFromPrimitiveList/<key>`` are honoured, ``$setElementOrder/<key>`` is ignored.
    """
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    body = {k: v for k, v in patch.items() if k != "$patch"}
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in body.items() if not k.startswith("$")}
    if directive not in (None, "merge"):
        raise PatchError(f"unknown patch type: {directive} in map: {patch}")
    result = dict(target) if isinstance(target, dict) else {}
    retain = body.pop("$retainKeys", None)
    for key, value in body.items():
        if key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            current = result.get(name)
            if isinstance(current, list) and isinstance(value, list):
                result[name] = [item for item in current if item not in value]
            continue
        if (isinstance(value, dict) and value.get("$patch") == "delete") or value is None:
            result.pop(key, None)
        else:
            result[key] = strategic_merge_patch(result.get(key), value)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _split_pointer(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f'invalid JSON pointer "{pointer}"')
    return [_unescape(t) for t in pointer[1:].split("/")]


def _index(container: list[Any], token: str, *, allow_end: bool) -> int:
    if allow_end and token == "-":  # noqa: S105 - a JSON pointer token, not a secret
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f'invalid array index "{token}"')
    index = int(token)
    if index > len(container) or (not allow_end and index == len(container)):
        raise PatchError(f"array index {index} out of bounds")
    return index


def _parent(doc: Any, tokens: list[str], pointer: str) -> Any:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, allow_end=False)]
        else:
            raise PatchError(f'path "{pointer}" does not exist')
    return node


def _get(doc: Any, pointer: str) -> Any:
    tokens = _split_pointer(pointer)
    if not tokens:
        return doc
    parent = _parent(doc, tokens, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f'path "{pointer}" does not exist')
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, allow_end=False)]
    raise PatchError(f'path "{pointer}" does not exist')


def _add(doc: Any, pointer: str, value: Any) -> Any:
    tokens = _split_pointer(pointer)
    if not tokens:
        return value
    parent = _parent(doc, tokens, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, allow_end=True), value)
    else:
        raise PatchError(f'path "{pointer}" does not exist')
    return doc


def _remove(doc: Any, pointer: str) -> Any:
    tokens = _split_pointer(pointer)
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _parent(doc, tokens, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"unable to remove nonexistent key: {last}: missing value")
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, allow_end=False)]
    else:
        raise PatchError(f'path "{pointer}" does not exist')
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 (add, remove, replace, move, copy, test)."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for operation in operations:
        if not isinstance(operation, dict) or "op" not in operation or "path" not in operation:
            raise PatchError(f"invalid JSON patch operation: {operation}")
        op, path = operation["op"], operation["path"]
        if op in ("add", "replace", "test") and "value" not in operation:
            raise PatchError(f'operation "{op}" needs a value')
        if op == "add":
            doc = _add(doc, path, copy.deepcopy(operation["value"]))
        elif op == "remove":
            doc = _remove(doc, path)
        elif op == "replace":
            _get(doc, path)
            doc = (
                _add(_remove(doc, path), path, copy.deepcopy(operation["value"]))
                if _split_pointer(path)
                else copy.deepcopy(operation["value"])
            )
        elif op in ("move", "copy"):
            source = operation.get("from")
            if not isinstance(source, str):
                raise PatchError(f'operation "{op}" needs "from"')
            value = copy.deepcopy(_get(doc, source))
            if op == "move":
                doc = _remove(doc, source)
            doc = _add(doc, path, value)
        elif op == "test":
            if _get(doc, path) != operation["value"]:
                raise PatchError(f"testing value {path} failed")
        else:
            raise PatchError(f'unexpected kind of operation "{op}"')
    return doc
