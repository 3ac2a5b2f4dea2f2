"""Volcano's queue admission webhook (``validatequeue.volcano.sh``), as the sandbox applies it.

What volcano-sh/volcano ``pkg/webhooks/admission/queues/validate/validate_queue.go`` checks on
CREATE, UPDATE and DELETE of ``scheduling.volcano.sh/v1beta1`` queues, with its default options
(root queue protection on, queue depth at most 5, no allocated-pods check): quantities
(non-negative, whole for extended resources), ``guarantee <= deserved <= capability``, queue state,
hierarchy annotations, the parent (``spec.parent``) chain, a child's capability against its
ancestors', the children's guarantee and deserved sums against their parent, and deleting
``root``, ``default`` or a queue that has children. A denial is worded and coded as kube-apiserver
relays a webhook's refusal: 400, ``admission webhook "validatequeue.volcano.sh" denied the
request: ...``.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

from kubesandbox.core_validation import is_extended, quantity_value_errors
from kubesandbox.errors import ApiError
from kubesandbox.quantity import QuantityError, parse_quantity

WEBHOOK = "validatequeue.volcano.sh"
MAX_QUEUE_DEPTH = 5
HIERARCHY = "volcano.sh/hierarchy"
HIERARCHY_WEIGHTS = "volcano.sh/hierarchy-weights"
MIN_RESOURCE = 0.1

Queues = Callable[[], list[dict[str, Any]]]


def denied(message: str) -> ApiError:
    # kube-apiserver turns a webhook denial without a code into 400, status Failure, no reason.
    return ApiError(400, "", f'admission webhook "{WEBHOOK}" denied the request: {message}')


# -- Volcano's resource arithmetic (pkg/scheduler/api/resource_info.go) --------------------------


class _Resource:
    """cpu in milli-units, memory in bytes, scalar resources in milli-units."""

    def __init__(self, resources: dict[str, Any] | None = None) -> None:
        self.cpu = 0.0
        self.memory = 0.0
        self.scalars: dict[str, float] = {}
        for name, raw in (resources or {}).items():
            try:
                value = parse_quantity(raw)
            except (QuantityError, ValueError):
                continue
            if name == "cpu":
                self.cpu += float(value * 1000)
            elif name == "memory":
                self.memory += float(_ceil(value))
            elif name == "pods":
                self.scalars[name] = self.scalars.get(name, 0.0) + float(_ceil(value))
            elif name.startswith("count/"):
                continue
            elif name == "ephemeral-storage" or _is_scalar(name):
                self.scalars[name] = self.scalars.get(name, 0.0) + float(_ceil(value * 1000))

    def add(self, other: _Resource) -> None:
        self.cpu += other.cpu
        self.memory += other.memory
        for name, value in other.scalars.items():
            self.scalars[name] = self.scalars.get(name, 0.0) + value

    def less_partly_zero(self, other: _Resource) -> bool:
        """Volcano's ``LessPartly(other, Zero)``: some dimension of self is below other's."""
        if self.cpu < other.cpu or self.memory < other.memory:
            return True
        if any(name not in self.scalars for name in other.scalars):
            return True
        return any(value < other.scalars.get(name, 0.0) for name, value in self.scalars.items())

    def get(self, name: str) -> float:
        if name == "cpu":
            return self.cpu
        if name == "memory":
            return self.memory
        return self.scalars.get(name, 0.0)

    def names(self) -> list[str]:
        out = []
        if self.cpu >= MIN_RESOURCE:
            out.append("cpu")
        if self.memory >= MIN_RESOURCE:
            out.append("memory")
        out += [name for name, value in self.scalars.items() if value >= MIN_RESOURCE]
        return out

    def __str__(self) -> str:
        parts = [f"cpu {self.cpu:0.2f}", f"memory {self.memory:0.2f}"]
        parts += [f"{name} {self.scalars[name]:0.2f}" for name in sorted(self.scalars)]
        return ", ".join(parts)


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def _is_scalar(name: str) -> bool:
    return (
        is_extended(name)
        or name.startswith("hugepages-")
        or "kubernetes.io/" in name
        or name.startswith("attachable-volumes-")
    )


def _format(name: str, value: float) -> str:
    if name == "cpu":
        return f"{int(value)}m" if int(value) % 1000 else str(int(value) // 1000)
    if name == "memory":
        return str(int(value))
    return f"{value:.2f}"


# -- the checks ---------------------------------------------------------------------------------


def _spec(queue: dict[str, Any]) -> dict[str, Any]:
    return queue.get("spec") or {}


def _guarantee(queue: dict[str, Any]) -> dict[str, Any]:
    return (_spec(queue).get("guarantee") or {}).get("resource") or {}


def _parent(queue: dict[str, Any]) -> str:
    return _spec(queue).get("parent") or ""


def _name(queue: dict[str, Any]) -> str:
    return (queue.get("metadata") or {}).get("name") or ""


def _field_errors(queue: dict[str, Any]) -> list[str]:
    spec = _spec(queue)
    base = "requestBody.spec"
    errors: list[str] = []
    for section in ("capability", "deserved"):
        for name, value in (spec.get(section) or {}).items():
            errors += [
                _rendered(f"{base}.{section}.{name}", e.message)
                for e in quantity_value_errors(name, value, "")
            ]
    deserved = spec.get("deserved") or {}
    for name, value in _guarantee(queue).items():
        path = f"{base}.guarantee.resource.{name}"
        errors += [_rendered(path, e.message) for e in quantity_value_errors(name, value, "")]
        if name not in deserved:
            errors.append(
                f'{base}.deserved.{name}: Invalid value: "<nil>": deserved[{name}] must be >= '
                f"guarantee[{name}]={value}"
            )
            continue
        if _less(deserved[name], value):
            errors.append(
                f'{base}.deserved.{name}: Invalid value: "{deserved[name]}": deserved[{name}]='
                f"{deserved[name]} must be >= guarantee[{name}]={value}"
            )
    capability = spec.get("capability") or {}
    if deserved and capability:
        for name, value in deserved.items():
            if name in capability and _less(capability[name], value):
                errors.append(
                    f'{base}.deserved.{name}: Invalid value: "{value}": deserved[{name}]={value} '
                    f"must be <= capability[{name}]={capability[name]}"
                )
    state = (queue.get("status") or {}).get("state")
    if state and state not in ("Open", "Closed"):
        errors.append(
            f'{base}.state: Invalid value: "{state}": queue state must be in [Open Closed]'
        )
    return errors


def _rendered(path: str, message: str) -> str:
    return f"{path}: {message}"


def _less(left: Any, right: Any) -> bool:
    try:
        return parse_quantity(left) < parse_quantity(right)
    except (QuantityError, ValueError):
        return False


def _hierarchy_errors(queue: dict[str, Any], queues: list[dict[str, Any]]) -> list[str]:
    annotations = (queue.get("metadata") or {}).get("annotations") or {}
    hierarchy = annotations.get(HIERARCHY, "")
    weights = annotations.get(HIERARCHY_WEIGHTS, "")
    if not hierarchy and not weights:
        return []
    path = "requestBody.metadata.annotations"
    paths, parts = hierarchy.split("/"), weights.split("/")
    if len(paths) != len(parts):
        return [
            f'{path}: Invalid value: "{hierarchy}": {HIERARCHY} must have the same length with '
            f"{HIERARCHY_WEIGHTS}"
        ]
    for weight in parts:
        try:
            number = float(weight)
        except ValueError:
            return [
                f'{path}: Invalid value: "{weights}": {weight} in the {weights} is invalid number: '
                f'strconv.ParseFloat: parsing "{weight}": invalid syntax'
            ]
        if number <= 0:
            return [
                f'{path}: Invalid value: "{weights}": {weight} in the {weights} must be larger '
                "than 0"
            ]
    for other in queues:
        theirs = ((other.get("metadata") or {}).get("annotations") or {}).get(HIERARCHY, "")
        if theirs and _name(other) != _name(queue) and theirs.startswith(hierarchy + "/"):
            return [
                f'{path}: Invalid value: "{hierarchy}": {hierarchy} is not allowed to be in the '
                f"sub path of {theirs} of queue {_name(other)}"
            ]
    return []


def _aggregate(errors: list[str]) -> str:
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"


class _QueuesByName(dict):
    """Queues by name, with their children by parent indexed on first use: one pass per
    admission instead of one per lookup (thousands of queues on a large cluster)."""

    _kids: dict[str, list[dict[str, Any]]] | None = None

    def children(self, parent: str) -> list[dict[str, Any]]:
        if self._kids is None:
            self._kids = {}
            for queue in self.values():
                self._kids.setdefault(_parent(queue), []).append(queue)
        return self._kids.get(parent, [])

    def pop(self, *args):
        self._kids = None
        return super().pop(*args)

    def __setitem__(self, key, value):
        self._kids = None
        super().__setitem__(key, value)

    def __delitem__(self, key):
        self._kids = None
        super().__delitem__(key)


class QueueWebhook:
    """The webhook over the sandbox's queues; ``queues`` lists the stored queues."""

    def __init__(self, queues: Queues) -> None:
        self._queues = queues

    def _by_name(self) -> _QueuesByName:
        return _QueuesByName((_name(q), q) for q in self._queues())

    def _children(self, parent: str, by_name: _QueuesByName) -> list[dict[str, Any]]:
        return by_name.children(parent)

    def admit(self, queue: dict[str, Any], old: dict[str, Any] | None) -> None:
        """CREATE (``old`` None) or UPDATE; raises the denial as an :class:`ApiError`."""
        by_name = self._by_name()
        errors = _field_errors(queue) + _hierarchy_errors(queue, list(by_name.values()))
        if errors:
            raise denied(_aggregate(errors))
        name = _name(queue)
        by_name.pop(name, None)
        if old is None or _parent(old) != _parent(queue):
            self._check_parent(queue, by_name)
        if old is not None and name == "root":
            for section in ("capability", "deserved"):
                if _resources_differ(_spec(queue).get(section), _spec(old).get(section)):
                    raise denied(
                        "root queue's resource attributes (capability, deserved, guarantee) "
                        "cannot be modified"
                    )
            if _resources_differ(_guarantee(queue), _guarantee(old)):
                raise denied(
                    "root queue's resource attributes (capability, deserved, guarantee) cannot "
                    "be modified"
                )
        if name != "root" and (old is None or _needs_hierarchy_check(queue, old)):
            self._check_resources(queue, by_name)

    def _check_parent(self, queue: dict[str, Any], others: dict[str, dict[str, Any]]) -> None:
        parent, name = _parent(queue), _name(queue)
        if parent in ("", "root"):
            return
        if parent == name:
            raise denied(f"queue {name} cannot use itself as parent")
        depth, current = 1, parent
        while current not in ("", "root"):
            depth += 1
            if depth > MAX_QUEUE_DEPTH:
                raise denied(f"queue {name} exceeds the maximum allowed depth of {MAX_QUEUE_DEPTH}")
            found = others.get(current)
            if found is None:
                raise denied(
                    f"failed to get parent queue {current} of queue {name}: "
                    f'queue.scheduling.volcano.sh "{current}" not found'
                )
            current = _parent(found)

    def _check_resources(self, queue: dict[str, Any], others: dict[str, dict[str, Any]]) -> None:
        name, parent_name = _name(queue), _parent(queue)
        if parent_name not in ("", "root"):
            parent = others.get(parent_name)
            if parent is None:
                raise denied(
                    f"parent queue {parent_name} not found: "
                    f'queue.scheduling.volcano.sh "{parent_name}" not found'
                )
            self._check_ancestors(queue, others)
            self._check_sum(queue, parent, self._children(parent_name, others), prefix="parent ")
        children = self._children(name, others)
        if children:
            capability = _Resource(_spec(queue).get("capability"))
            if _spec(queue).get("capability"):
                for resource in capability.names():
                    mine = capability.get(resource)
                    most = max(
                        (self._subtree_max(child, resource, others) for child in children),
                        default=0.0,
                    )
                    if mine < most:
                        raise denied(
                            f"queue {name} capability[{resource}]={_format(resource, mine)} is "
                            "smaller than its descendants' max "
                            f"capability={_format(resource, most)}"
                        )
            self._check_sum(None, queue, children, prefix="")

    def _check_ancestors(self, queue: dict[str, Any], others: dict[str, dict[str, Any]]) -> None:
        if not _spec(queue).get("capability"):
            return
        capability = _Resource(_spec(queue).get("capability"))
        for resource in capability.names():
            mine = capability.get(resource)
            current = _parent(queue)
            while current not in ("", "root"):
                ancestor = others.get(current)
                if ancestor is None:
                    break
                limit = _Resource(_spec(ancestor).get("capability")).get(resource)
                if _spec(ancestor).get("capability") and limit > 0:
                    if mine > limit:
                        raise denied(
                            f"queue {_name(queue)} capability[{resource}]="
                            f"{_format(resource, mine)} exceeds its ancestor's "
                            f"capability={_format(resource, limit)}"
                        )
                    break
                current = _parent(ancestor)

    def _subtree_max(
        self, queue: dict[str, Any], resource: str, others: dict[str, dict[str, Any]]
    ) -> float:
        own = _Resource(_spec(queue).get("capability")).get(resource)
        if own > 0:
            return own
        return max(
            (
                self._subtree_max(child, resource, others)
                for child in self._children(_name(queue), others)
            ),
            default=0.0,
        )

    def _check_sum(
        self,
        queue: dict[str, Any] | None,
        parent: dict[str, Any],
        siblings: list[dict[str, Any]],
        *,
        prefix: str,
    ) -> None:
        guarantee_limit = _Resource(_guarantee(parent))
        deserved_limit = _Resource(_spec(parent).get("deserved"))
        guarantee, deserved = _Resource(), _Resource()
        members = [s for s in siblings if queue is None or _name(s) != _name(queue)]
        if queue is not None:
            members.append(queue)
        label = f"{prefix}queue {_name(parent)} validation failed"
        for member in members:
            guarantee.add(_Resource(_guarantee(member)))
            if guarantee_limit.less_partly_zero(guarantee):
                raise denied(
                    f"{label}: sum of children's guarantee ({guarantee}) exceeds parent's "
                    f"guarantee limit ({guarantee_limit})"
                )
            deserved.add(_Resource(_spec(member).get("deserved")))
            if deserved_limit.less_partly_zero(deserved):
                raise denied(
                    f"{label}: sum of children's deserved ({deserved}) exceeds parent's "
                    f"deserved limit ({deserved_limit})"
                )

    def admit_delete(self, name: str) -> None:
        if name in ("default", "root"):
            raise denied(f"`{name}` queue can not be deleted")
        by_name = self._by_name()
        children = sorted(_name(q) for q in self._children(name, by_name))
        if children:
            raise denied(
                f"queue {name} can not be deleted because it has {len(children)} child queues: "
                + ", ".join(children)
            )


def _resources_differ(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    a, b = a or {}, b or {}
    if set(a) != set(b):
        return True
    return any(_less(a[k], b[k]) or _less(b[k], a[k]) for k in a)


def _needs_hierarchy_check(queue: dict[str, Any], old: dict[str, Any]) -> bool:
    if _parent(queue) != _parent(old):
        return True
    for section in ("capability", "deserved"):
        if _resources_differ(_spec(queue).get(section), _spec(old).get(section)):
            return True
    return _resources_differ(_guarantee(queue), _guarantee(old))
