"""The order in which a sync writes and deletes objects, computed from the live and the
desired state (pure: no I/O).

Volcano's queue webhook checks a hierarchy on every write: the deserved and guarantee sums of
a queue's children must fit the queue, a child's capability must not exceed its parent's, and
a queue with children cannot be deleted. So a parent must grow before its children grow, and
children must shrink (or go) before their parent shrinks (or goes). Two phases do that:

1. children first (deepest first): deletes, and updates that shrink; an update that grows some
   amounts and shrinks others is written here with the smaller of old and new per amount;
2. parents first: creates, updates that grow, and the full desired value of the mixed ones.

Kueue's Cohorts form a tree too (``spec.parentName``); Kueue checks no sums across it, so only
the creation (parents first) and deletion (children first) order applies to them. Other objects
keep the order they are rendered in; other deletes come last, namespaced before cluster-scoped.
A queue moving to another parent is not ordered specially (the portal moves none today).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from decimal import Decimal

from kubernetes.utils.quantity import parse_quantity

from quotas.kube.objects import ObjectKey

VOLCANO_QUEUE = ("scheduling.volcano.sh/v1beta1", "Queue")
KUEUE_COHORT = ("kueue.x-k8s.io/v1beta2", "Cohort")
# Hierarchical kinds and the spec field naming the parent.
PARENT_FIELD = {VOLCANO_QUEUE: "parent", KUEUE_COHORT: "parentName"}
ROOTS = {"", "root"}  # Volcano's built-in root queue

APPLY = "apply"
DELETE = "delete"


@dataclass(frozen=True)
class Step:
    op: str  # APPLY or DELETE
    key: ObjectKey
    obj: dict | None = None  # the object to apply (an intermediate one for a mixed change)
    intermediate: bool = False  # a first, shrink-only write; the full one follows


# --- Volcano amounts ------------------------------------------------------------------------

# Maps of amounts in a Volcano Queue spec; an absent capability means unlimited, an absent
# deserved or guarantee means none.
_AMOUNT_MAPS = (("capability",), ("deserved",), ("guarantee", "resource"))
_UNLIMITED = Decimal("Infinity")


def _amount_map(spec: dict, path: tuple[str, ...]) -> dict[str, str]:
    node = spec
    for part in path:
        node = (node or {}).get(part) if isinstance(node, dict) else None
    return dict(node or {}) if isinstance(node, dict) else {}


def _quantity(text) -> Decimal:
    try:
        return Decimal(parse_quantity(text))
    except (ValueError, TypeError, ArithmeticError):
        return Decimal(0)


def _amount_pairs(old: dict, new: dict):
    """(path, resource, old value, new value) of every amount of a Volcano Queue."""
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    for path in _AMOUNT_MAPS:
        absent = _UNLIMITED if path == ("capability",) else Decimal(0)
        a, b = _amount_map(old_spec, path), _amount_map(new_spec, path)
        for name in sorted(set(a) | set(b)):
            va = _quantity(a[name]) if name in a else absent
            vb = _quantity(b[name]) if name in b else absent
            yield path, name, va, vb


def direction(old: dict, new: dict) -> tuple[bool, bool]:
    """(grows, shrinks) from live `old` to desired `new`; only Volcano queues have amounts."""
    if ObjectKey.of(new).group_kind != VOLCANO_QUEUE:
        return False, False
    grows = shrinks = False
    for _path, _name, a, b in _amount_pairs(old, new):
        grows |= b > a
        shrinks |= b < a
    return grows, shrinks


def shrunk(old: dict, new: dict) -> dict:
    """`new` with every amount at the smaller of old and new: the shrink-only first write of a
    change that grows some amounts and shrinks others."""
    result = copy.deepcopy(new)
    spec = result.setdefault("spec", {})
    old_spec = old.get("spec") or {}
    for path in _AMOUNT_MAPS:
        absent = _UNLIMITED if path == ("capability",) else Decimal(0)
        a, b = _amount_map(old_spec, path), _amount_map(spec, path)
        merged = {}
        for name in sorted(set(a) | set(b)):
            va = _quantity(a[name]) if name in a else absent
            vb = _quantity(b[name]) if name in b else absent
            if va <= vb:
                if name in a and (va != 0 or path == ("capability",)):
                    merged[name] = a[name]
            elif name in b and (vb != 0 or path == ("capability",)):
                merged[name] = b[name]
        node = spec
        for part in path[:-1]:
            node = node.setdefault(part, {})
        if merged:
            node[path[-1]] = merged
        else:
            node.pop(path[-1], None)
    if spec.get("guarantee") == {}:
        spec.pop("guarantee")
    return result


# --- depth in a hierarchy -------------------------------------------------------------------


def _parents(objects) -> dict[tuple[str, str, str], str]:
    parents = {}
    for obj in objects:
        kind = (obj["apiVersion"], obj["kind"])
        field = PARENT_FIELD.get(kind)
        if field:
            parent = (obj.get("spec") or {}).get(field) or ""
            if parent not in ROOTS:
                parents[(*kind, obj["metadata"]["name"])] = parent
    return parents


def _depth(key: ObjectKey, parents: dict[tuple[str, str, str], str]) -> int:
    node, level, seen = (*key.group_kind, key.name), 0, set()
    while node in parents and node not in seen:
        seen.add(node)
        node = (node[0], node[1], parents[node])
        level += 1
    return level


# --- the order ------------------------------------------------------------------------------


def write_order(
    desired: list[dict], live: dict[ObjectKey, dict], prune: list[ObjectKey] | None = None
) -> list[Step]:
    """The steps that take the cluster from `live` to `desired` and delete `prune`, in an
    order each step of which the hierarchy webhooks accept.

    `desired` is in render order (namespaces first, parents before children); objects whose
    key is missing from `live` are created.
    """
    prune = [ObjectKey(*key) for key in prune or []]
    # Depth: desired parents for what stays, live parents for what goes.
    parents = {**_parents(live.values()), **_parents(desired)}
    first: list[tuple[int, Step]] = []  # children first
    second: list[Step] = []  # parents first, in render order otherwise
    for obj in desired:
        key = ObjectKey.of(obj)
        old = live.get(key)
        if old is None or key.group_kind not in PARENT_FIELD:
            second.append(Step(APPLY, key, obj))
            continue
        grows, shrinks = direction(old, obj)
        if shrinks and not grows:
            first.append((_depth(key, parents), Step(APPLY, key, obj)))
        elif shrinks and grows:
            first.append((_depth(key, parents), Step(APPLY, key, shrunk(old, obj), True)))
            second.append(Step(APPLY, key, obj))
        else:
            second.append(Step(APPLY, key, obj))
    last: list[Step] = []
    for key in prune:
        if key.group_kind in PARENT_FIELD:
            first.append((_depth(key, parents), Step(DELETE, key)))
        else:
            last.append(Step(DELETE, key))
    first.sort(key=lambda item: -item[0])  # stable: equal depths keep their order
    second = _parents_first(second, parents)
    # Namespaced objects before cluster-scoped ones (a namespace's contents before it).
    last.sort(key=lambda step: step.key, reverse=True)
    return [step for _, step in first] + second + last


def _parents_first(steps: list[Step], parents) -> list[Step]:
    """Hierarchical objects of one kind re-sorted by depth within the places they hold."""
    for kind in PARENT_FIELD:
        places = [i for i, s in enumerate(steps) if s.key.group_kind == kind]
        ordered = sorted((steps[i] for i in places), key=lambda s: _depth(s.key, parents))
        for i, step in zip(places, ordered, strict=True):
            steps[i] = step
    return steps
