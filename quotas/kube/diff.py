"""Comparing desired objects with live ones, looking only at the fields the portal owns.

The portal writes with server-side apply under one field manager, so what it owns is what it
applied: its labels and annotations and the fields of the sections it renders (spec, data,
value, ...), map key by map key. Fields others set (defaults, status, an operator's
`stopPolicy`, a `pods:` quota added by hand, YuniKorn's own keys in `yunikorn-configs`) are
never a difference and never overwritten. Lists are compared whole (they are atomic).
"""

from typing import Any

IGNORED_TOP_LEVEL = frozenset({"apiVersion", "kind", "metadata", "status"})
MERGED_SECTIONS = frozenset({"data"})  # owned key by key, the rest of the map is kept


def project(live: Any, shape: Any) -> Any:
    """The part of `live` that has the shape of `shape` (keys `shape` has, recursively)."""
    if isinstance(shape, dict):
        if not isinstance(live, dict):
            return live
        return {k: project(live[k], v) for k, v in shape.items() if k in live}
    if isinstance(shape, list):
        if not isinstance(live, list) or len(live) != len(shape):
            return live
        return [project(item, s) for item, s in zip(live, shape, strict=True)]
    return live


def owned(obj: dict, *, label_keys=None, annotation_keys=None) -> dict:
    """The owned view of a desired object: its labels/annotations and its other sections."""
    meta = obj.get("metadata", {})
    view: dict[str, Any] = {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    if label_keys is not None:
        labels = {k: v for k, v in labels.items() if k in label_keys}
    if annotation_keys is not None:
        annotations = {k: v for k, v in annotations.items() if k in annotation_keys}
    if labels:
        view["labels"] = labels
    if annotations:
        view["annotations"] = annotations
    for key, value in obj.items():
        if key not in IGNORED_TOP_LEVEL:
            view[key] = value
    return view


def live_view(live: dict, desired_view: dict) -> dict:
    """The live object's values at the places the desired view owns."""
    meta = live.get("metadata", {})
    source = {
        "labels": meta.get("labels") or {},
        "annotations": meta.get("annotations") or {},
        **{k: v for k, v in live.items() if k not in IGNORED_TOP_LEVEL},
    }
    view = {}
    for key, shape in desired_view.items():
        if key not in source:
            continue
        if key in ("labels", "annotations") or key in MERGED_SECTIONS:
            # Maps owned key by key: a key missing live is simply absent from the view.
            view[key] = {k: source[key][k] for k in shape if k in (source[key] or {})}
        else:
            view[key] = project(source[key], shape)
    return view


def differences(old: Any, new: Any, path: str = "") -> list[dict]:
    """Flat list of changes [{"path", "old", "new"}] between two owned views."""
    if isinstance(old, dict) and isinstance(new, dict):
        changes = []
        for key in sorted(set(old) | set(new), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in old:
                changes.append({"path": sub, "old": None, "new": new[key]})
            elif key not in new:
                changes.append({"path": sub, "old": old[key], "new": None})
            else:
                changes.extend(differences(old[key], new[key], sub))
        return changes
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        changes = []
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            changes.extend(differences(a, b, f"{path}[{i}]"))
        return changes
    if _normal(old) == _normal(new):
        return []
    return [{"path": path, "old": old, "new": new}]


def _normal(value: Any) -> Any:
    # Quantities come back from some servers as numbers: 10 and "10" are the same value.
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return str(value)
    return value


def union_shape(old: Any, new: Any) -> Any:
    """Both owned views in one shape (`new` wins on leaves): comparing the live object at
    this shape also finds fields the portal wrote before but no longer wants."""
    if isinstance(old, dict) and isinstance(new, dict):
        merged = dict(old)
        for key, value in new.items():
            merged[key] = union_shape(old[key], value) if key in old else value
        return merged
    return new
