"""Comparing desired objects with live ones, looking only at the fields the portal owns.

API servers and controllers add fields of their own (defaults, status, other labels); those are
never a difference. What the portal owns is: its labels and annotations, and every other
top-level section it renders (spec, data, value, ...). ConfigMap data is owned key by key, since
the portal shares `yunikorn-configs` with YuniKorn's own settings.
"""

import copy
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


def merged_for_write(live: dict, desired: dict) -> dict:
    """The object to PUT: live as it is, with the portal's owned fields set to desired."""
    body = copy.deepcopy(live)
    body.pop("status", None)
    meta = body.setdefault("metadata", {})
    dmeta = desired.get("metadata", {})
    for key in ("labels", "annotations"):
        if dmeta.get(key):
            meta[key] = {**(meta.get(key) or {}), **dmeta[key]}
    for key, value in desired.items():
        if key in IGNORED_TOP_LEVEL:
            continue
        if key in MERGED_SECTIONS and isinstance(body.get(key), dict):
            body[key] = {**body[key], **value}
        else:
            body[key] = copy.deepcopy(value)
    body["apiVersion"], body["kind"] = desired["apiVersion"], desired["kind"]
    return body
