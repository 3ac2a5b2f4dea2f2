"""Field ownership (``metadata.managedFields``) and server-side apply.

A field set is a set of paths; a path is a tuple of ``f:<name>`` elements, the same encoding as the
``fieldsV1`` format the API server writes. The sandbox treats maps as mergeable and lists as
atomic (a list is one leaf), which is what the portal's objects need.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

Path = tuple[str, ...]
FieldSet = set[Path]

# Fields the API server never records in managedFields (its "stripmeta" step).
_IGNORED_META = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)


@dataclass
class ManagedEntry:
    manager: str
    operation: str
    api_version: str
    time: str
    fields: FieldSet = field(default_factory=set)
    subresource: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1(self.fields),
        }
        if self.subresource:
            out["subresource"] = self.subresource
        return out

    def same_fields(self, other: ManagedEntry) -> bool:
        return (self.manager, self.operation, self.api_version, self.subresource, self.fields) == (
            other.manager,
            other.operation,
            other.api_version,
            other.subresource,
            other.fields,
        )


class ApplyConflict(Exception):
    """Fields of the applied configuration are owned by other managers with other values."""

    def __init__(self, conflicts: list[tuple[str, str, str]]) -> None:
        # (manager, apiVersion, ".spec.hard.requests.nvidia.com/gpu")
        self.conflicts = conflicts
        super().__init__(f"{len(conflicts)} conflict(s)")


def render_path(path: Path) -> str:
    return "".join("." + element[2:] for element in path)


def to_fields_v1(paths: FieldSet) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for element in path:
            node = node.setdefault(element, {})
    for path in paths:
        node = tree
        for element in path:
            node = node[element]
        if node and "." not in node:
            children = dict(node)
            node.clear()
            node["."] = {}
            node.update(children)
    return tree


def from_fields_v1(tree: Any, prefix: Path = ()) -> FieldSet:
    out: FieldSet = set()
    if not isinstance(tree, dict):
        return out
    if prefix and (not tree or "." in tree):
        out.add(prefix)
    for key, child in tree.items():
        if key != ".":
            out |= from_fields_v1(child, (*prefix, key))
    return out


def parse_entries(obj: dict[str, Any]) -> list[ManagedEntry]:
    entries = []
    for raw in (obj.get("metadata") or {}).get("managedFields") or []:
        if not isinstance(raw, dict):
            continue
        entries.append(
            ManagedEntry(
                manager=raw.get("manager", ""),
                operation=raw.get("operation", "Update"),
                api_version=raw.get("apiVersion", ""),
                time=raw.get("time", ""),
                fields=from_fields_v1(raw.get("fieldsV1") or {}),
                subresource=raw.get("subresource", ""),
            )
        )
    return entries


def managed_view(obj: dict[str, Any] | None, *, drop_status: bool) -> dict[str, Any]:
    """The part of ``obj`` whose fields can be owned."""
    if not obj:
        return {}
    view = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    if drop_status:
        view.pop("status", None)
    meta = view.get("metadata")
    if isinstance(meta, dict):
        view["metadata"] = {k: v for k, v in meta.items() if k not in _IGNORED_META}
        if not view["metadata"]:
            del view["metadata"]
    return view


_MISSING = object()


def get_path(obj: Any, path: Path) -> Any:
    node = obj
    for element in path:
        if not isinstance(node, dict) or element[2:] not in node:
            return _MISSING
        node = node[element[2:]]
    return node


def leaf_paths(obj: Any, prefix: Path = ()) -> FieldSet:
    """Paths of every scalar, list and empty map in ``obj``."""
    out: FieldSet = set()
    for key, value in obj.items():
        path = (*prefix, "f:" + key)
        if isinstance(value, dict) and value:
            out |= leaf_paths(value, path)
        else:
            out.add(path)
    return out


def node_paths(obj: Any, prefix: Path = ()) -> FieldSet:
    """Paths of every non-empty map in ``obj`` (below the top level)."""
    out: FieldSet = set()
    for key, value in obj.items():
        path = (*prefix, "f:" + key)
        if isinstance(value, dict) and value:
            if prefix:
                out.add(path)
            out |= node_paths(value, path)
    return out


def _drop_under(fields: FieldSet, roots: FieldSet) -> FieldSet:
    return {p for p in fields if not any(p[: len(r)] == r for r in roots)}


def record_update(
    old: dict[str, Any] | None,
    new: dict[str, Any],
    entries: list[ManagedEntry],
    *,
    manager: str,
    api_version: str,
    now: str,
    drop_status: bool,
    subresource: str = "",
) -> list[ManagedEntry]:
    """Ownership after a non-apply write: ``manager`` takes every field it changed."""
    old_view = managed_view(old, drop_status=drop_status)
    new_view = managed_view(new, drop_status=drop_status)
    if subresource == "status":
        old_view = {"status": (old or {}).get("status", {})} if old and "status" in old else {}
        new_view = {"status": new["status"]} if "status" in new else {}
    old_all = leaf_paths(old_view) | node_paths(old_view)
    new_leaves = leaf_paths(new_view)
    new_nodes = node_paths(new_view)
    changed = {p for p in new_leaves if get_path(old_view, p) != get_path(new_view, p)}
    changed |= {
        p
        for p in new_nodes
        if not isinstance(get_path(old_view, p), dict) or not get_path(old_view, p)
    }
    removed = old_all - (new_leaves | new_nodes)
    if not changed and not removed:
        return entries
    result: list[ManagedEntry] = []
    own: ManagedEntry | None = None
    for entry in entries:
        entry = copy.copy(entry)
        if (
            entry.manager == manager
            and entry.operation == "Update"
            and entry.subresource == subresource
        ):
            own = entry
        entry.fields = _drop_under(entry.fields - changed, removed)
        result.append(entry)
    if own is None:
        own = ManagedEntry(manager, "Update", api_version, now, set(), subresource)
        result.append(own)
    own.fields |= changed
    own.api_version = api_version
    own.time = now
    return [e for e in result if e.fields]


def _deep_merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        current = target.get(key)
        if isinstance(value, dict) and isinstance(current, dict):
            merged = dict(current)
            _deep_merge(merged, value)
            target[key] = merged
        else:
            target[key] = copy.deepcopy(value)


def _delete_path(obj: dict[str, Any], path: Path, keep: FieldSet) -> None:
    parents = []
    node: Any = obj
    for element in path[:-1]:
        if not isinstance(node, dict) or element[2:] not in node:
            return
        parents.append((node, element[2:]))
        node = node[element[2:]]
    if isinstance(node, dict):
        node.pop(path[-1][2:], None)
    # Prune maps emptied by the removal (not the top-level fields), unless someone owns them.
    for depth in range(len(parents) - 1, 0, -1):
        parent, key = parents[depth]
        if parent.get(key) == {} and path[: depth + 1] not in keep:
            del parent[key]
        else:
            break


def apply(
    live: dict[str, Any] | None,
    applied: dict[str, Any],
    entries: list[ManagedEntry],
    *,
    manager: str,
    api_version: str,
    now: str,
    force: bool,
    drop_status: bool,
) -> tuple[dict[str, Any], list[ManagedEntry]]:
    """Merge ``applied`` into ``live`` for ``manager``; raise ApplyConflict unless ``force``."""
    applied_view = managed_view(applied, drop_status=drop_status)
    live_view = managed_view(live, drop_status=drop_status)
    applied_set = leaf_paths(applied_view)
    own_prev: FieldSet = set()
    others: list[ManagedEntry] = []
    for entry in entries:
        if entry.manager == manager and entry.operation == "Apply" and not entry.subresource:
            own_prev = set(entry.fields)
        else:
            others.append(copy.copy(entry))
    conflicts: list[tuple[str, str, str]] = []
    lost: FieldSet = set()
    for entry in others:
        if entry.subresource:
            continue
        for path in sorted(entry.fields & applied_set):
            if get_path(live_view, path) != get_path(applied_view, path):
                conflicts.append((entry.manager, entry.api_version, render_path(path)))
                lost.add(path)
    if conflicts and not force:
        raise ApplyConflict(conflicts)
    for entry in others:
        entry.fields = entry.fields - lost
    owned_by_others: FieldSet = set().union(*(e.fields for e in others)) if others else set()

    result = copy.deepcopy(live) if live else {}
    for path in sorted(own_prev - applied_set, key=len, reverse=True):
        still_owned = any(p[: len(path)] == path for p in owned_by_others)
        if not still_owned and get_path(result, path) is not _MISSING:
            _delete_path(result, path, owned_by_others)
    _deep_merge(result, applied)
    own = ManagedEntry(manager, "Apply", api_version, now, applied_set)
    new_entries = [e for e in others if e.fields]
    # Keep the manager's position in the list stable, as the API server does.
    position = next(
        (
            i
            for i, e in enumerate(entries)
            if e.manager == manager and e.operation == "Apply" and not e.subresource
        ),
        len(new_entries),
    )
    new_entries.insert(min(position, len(new_entries)), own)
    return result, new_entries
