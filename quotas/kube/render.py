"""Render a :class:`~quotas.kube.plan.ClusterPlan` into the Kubernetes objects it stands for.

Pure functions over the frozen plan dataclasses: no I/O, no Django. Every function returns plain
``dict`` objects (apiVersion, kind, metadata, spec/data ...) ready to be applied, validated with
``kubesandbox.schemas.validate_object`` or dumped as YAML. Same plan in, same objects out, in the
same order (``render_cluster`` sorts them for applying).

Mapping (see shared/PRODUCT.md, "How an allocation maps onto cluster objects"):

- core: ``Namespace`` labels; ``ResourceQuota`` ``gpu-quota`` with the caps, plus
  ``gpu-quota-other-classes`` (hard 0 for pods outside the allowed priority classes);
  ``LimitRange`` ``gpu-limits`` with per-pod ``max`` only; ``PriorityClass`` objects.
- Volcano: one cluster-scoped ``Queue`` per team namespace (deserved = guarantee, capability =
  cap) under department queues.
- Kueue (v1beta2): ``ResourceFlavor`` per GPU model, ``Cohort`` chain, ``ClusterQueue`` per team
  namespace (nominalQuota = guarantee, borrowingLimit = cap - guarantee), LocalQueue ``default``.
- YuniKorn: ``queues.yaml`` in ConfigMap ``yunikorn-configs``.

The generation annotation is not rendered: the sync engine adds it when it writes.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

import yaml

from quotas.kube.plan import AllocationPlan, ClusterPlan, NamespacePlan, PriorityClassPlan

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
TEAM_LABEL = "quota-portal/team"
# Which portal cluster wrote the object: a sync only ever prunes objects of its own cluster,
# even when two portal clusters are pointed at the same API server by mistake.
CLUSTER_LABEL = "quota-portal/cluster"
WORKLOAD_LABEL = "quota-portal/workload-class"
GENERATION_ANNOTATION = "quota-portal/generation"

RESOURCE_QUOTA_NAME = "gpu-quota"
OTHER_CLASSES_QUOTA_NAME = "gpu-quota-other-classes"
LIMIT_RANGE_NAME = "gpu-limits"
LOCAL_QUEUE_NAME = "default"
YUNIKORN_CONFIGMAP_NAME = "yunikorn-configs"
YUNIKORN_QUEUES_KEY = "queues.yaml"
VOLCANO_ROOT_QUEUE = "root"
DEFAULT_FLAVOR = "default-flavor"

VOLCANO_API = "scheduling.volcano.sh/v1beta1"
KUEUE_API = "kueue.x-k8s.io/v1beta2"

# HAMi vGPU resources are enforced by HAMi on pod *limits* (limits.nvidia.com/gpumem,
# limits.nvidia.com/gpucores); everything else is quota'd on requests (the only prefix
# Kubernetes' own quota evaluator tracks for extended resources).
_LIMIT_KINDS = frozenset({"vgpu_memory", "vgpu_cores"})
# Kinds that count as accelerators when deriving a Volcano weight.
_ACCELERATOR_KINDS = frozenset({"gpu", "mig"})
_MAX_INT32 = 2**31 - 1

# Apply order: namespaces, then cluster-scoped objects, then namespaced objects.
_KIND_ORDER = {
    ("v1", "Namespace"): 0,
    ("scheduling.k8s.io/v1", "PriorityClass"): 1,
    (KUEUE_API, "ResourceFlavor"): 2,
    (KUEUE_API, "Cohort"): 3,
    (VOLCANO_API, "Queue"): 4,
    (KUEUE_API, "ClusterQueue"): 5,
    ("v1", "ResourceQuota"): 6,
    ("v1", "LimitRange"): 7,
    (KUEUE_API, "LocalQueue"): 8,
    ("v1", "ConfigMap"): 9,
}


# --------------------------------------------------------------------------------------------
# Quantities


# Suffix -> (base, exponent): the units of the Kubernetes quantity grammar, largest first.
_BINARY_UNITS = {"Ei": 6, "Pi": 5, "Ti": 4, "Gi": 3, "Mi": 2, "Ki": 1, "": 0}
_DECIMAL_UNITS = {"E": 18, "P": 15, "T": 12, "G": 9, "M": 6, "k": 3, "": 0, "m": -3, "n": -9}


def _plain(amount: Decimal) -> str:
    """Decimal without exponent and without trailing zeros: 6, 0.5, 600."""
    text = format(amount.normalize(), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def _in_base_units(amount: Decimal, suffix: str) -> Decimal | None:
    if suffix in _BINARY_UNITS and suffix:
        return amount * Decimal(1024) ** _BINARY_UNITS[suffix]
    if suffix in _DECIMAL_UNITS:
        return amount.scaleb(_DECIMAL_UNITS[suffix])
    return None


def quantity(amount: Decimal, suffix: str = "") -> str:
    """A canonical Kubernetes quantity string for ``amount`` (in units of ``suffix``).

    Whole amounts keep the suffix (``6`` -> "6", ``(16, "Gi")`` -> "16Gi"); fractions step down
    to the next smaller unit of the same family until they are whole (``0.5`` -> "500m",
    ``(1.5, "Gi")`` -> "1536Mi"). Amounts finer than the smallest unit stay plain decimals, which
    the quantity grammar still accepts. No trailing zeros, no exponent.
    """
    amount = Decimal(amount)
    if amount == amount.to_integral_value():
        return _plain(amount) + suffix
    base = _in_base_units(amount, suffix)
    if base is None:
        # Not a suffix of the quantity grammar: leave it as given (validation will say so).
        return _plain(amount) + suffix
    if suffix in _BINARY_UNITS and suffix:
        units = [
            (u, Decimal(1024) ** e) for u, e in _BINARY_UNITS.items() if e < _BINARY_UNITS[suffix]
        ]
    else:
        units = [
            (u, Decimal(1).scaleb(e))
            for u, e in _DECIMAL_UNITS.items()
            if e < _DECIMAL_UNITS[suffix]
        ]
    for unit, size in units:
        value = base / size
        if value == value.to_integral_value():
            return _plain(value) + unit
    return _plain(amount) + suffix


def _yunikorn_quantity(amount: Decimal, resource_name: str, suffix: str) -> str:
    """YuniKorn wants ``<0..maxint>[suffix]`` (whole numbers; ``m`` only for vcore)."""
    text = quantity(amount, suffix)
    if re.fullmatch(r"[0-9]+(k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?", text):
        return text
    if resource_name == "cpu" and re.fullmatch(r"[0-9]+m", text):
        return text
    # Otherwise whole base units, rounded up (never grant less than approved).
    base = _in_base_units(Decimal(amount), suffix)
    if base is None:
        base = Decimal(amount)
    if resource_name == "cpu":
        return f"{math.ceil(base * 1000)}m"
    return str(math.ceil(base))


# --------------------------------------------------------------------------------------------
# Small helpers


def object_key(obj: dict) -> tuple[str, str, str, str]:
    """(apiVersion, kind, namespace or "", name) of a rendered object."""
    meta = obj.get("metadata") or {}
    return (obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"])


def _labels(plan: ClusterPlan, team: str | None = None, **extra: str) -> dict[str, str]:
    labels = {MANAGED_BY_LABEL: plan.managed_by, CLUSTER_LABEL: plan.name}
    if team:
        labels[TEAM_LABEL] = team
    labels.update(extra)
    return labels


def _metadata(
    plan: ClusterPlan, name: str, *, namespace: str | None = None, team: str | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = _labels(plan, team)
    return meta


def _amount(allocation: AllocationPlan, value: Decimal) -> str:
    return quantity(value, allocation.resource.quantity_suffix)


def _quota_key(allocation: AllocationPlan) -> str:
    """The ResourceQuota ``spec.hard`` key of an allocation's resource."""
    resource = allocation.resource
    if resource.kind in _LIMIT_KINDS:
        return f"limits.{resource.name}"
    return f"requests.{resource.name}"


def _sorted_allocations(ns: NamespacePlan) -> list[AllocationPlan]:
    return sorted(ns.allocations, key=lambda a: a.resource.name)


def _with_allocations(plan: ClusterPlan) -> list[NamespacePlan]:
    return sorted((ns for ns in plan.namespaces if ns.allocations), key=lambda ns: ns.name)


def flavor_name(gpu_model: str) -> str:
    """Kueue ResourceFlavor name of a GPU model: "A100 80GB" -> "a100-80gb"."""
    slug = re.sub(r"[^a-z0-9]+", "-", gpu_model.lower()).strip("-")[:63].strip("-")
    return slug or DEFAULT_FLAVOR


def _resource_totals(
    namespaces: Iterable[NamespacePlan],
) -> dict[str, tuple[AllocationPlan, Decimal, Decimal]]:
    """Per resource name: (an allocation of it, sum of guarantees, sum of caps)."""
    totals: dict[str, tuple[AllocationPlan, Decimal, Decimal]] = {}
    for ns in namespaces:
        for a in ns.allocations:
            _, guarantee, cap = totals.get(a.resource.name, (a, Decimal(0), Decimal(0)))
            totals[a.resource.name] = (a, guarantee + a.guarantee, cap + a.cap)
    return dict(sorted(totals.items()))


def _departments(plan: ClusterPlan) -> dict[str, tuple[str | None, list[NamespacePlan]]]:
    """Department slug -> (its parent department or None, all namespaces below it)."""
    departments: dict[str, tuple[str | None, list[NamespacePlan]]] = {}
    for ns in _with_allocations(plan):
        chain = ns.team.ancestors
        for i, dept in enumerate(chain):
            parent = chain[i + 1] if i + 1 < len(chain) else None
            _, members = departments.setdefault(dept, (parent, []))
            members.append(ns)
    return dict(sorted(departments.items()))


# --------------------------------------------------------------------------------------------
# core


def render_namespace_object(plan: ClusterPlan, ns: NamespacePlan) -> dict:
    """The team ``Namespace``: name and labels only."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": ns.name,
            "labels": _labels(plan, ns.team.slug, **{WORKLOAD_LABEL: ns.workload_class}),
        },
    }


def render_resource_quotas(plan: ClusterPlan, ns: NamespacePlan) -> list[dict]:
    """``gpu-quota`` (the caps) and, for allocations limited to priority classes, the
    ``gpu-quota-other-classes`` quota that gives every other class zero.

    Kubernetes semantics: a quota without scope counts every pod of the namespace, so
    ``gpu-quota`` caps the total. A ``scopeSelector`` quota only counts the pods it selects; the
    quota evaluator matches ``PriorityClass`` against a label set holding the pod's
    ``priorityClassName`` (empty when unset), and ``NotIn`` matches both other classes and pods
    without a class. Hard 0 there rejects any such pod that requests the resource, while pods of
    the allowed classes are only held to ``gpu-quota``. Extended resource names are exempt from
    the API server's "unsupported scope applied to resource" check, and requests.cpu/memory are
    valid under the PriorityClass scope, so the quota validates for every resource kind.
    """
    allocations = _sorted_allocations(ns)
    if not allocations:
        return []
    quotas = [
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": _metadata(plan, RESOURCE_QUOTA_NAME, namespace=ns.name, team=ns.team.slug),
            "spec": {"hard": {_quota_key(a): _amount(a, a.cap) for a in allocations}},
        }
    ]
    # One "other classes" quota per distinct set of allowed classes (usually just one).
    by_classes: dict[tuple[str, ...], list[AllocationPlan]] = {}
    for a in allocations:
        if a.priority_classes:
            by_classes.setdefault(tuple(sorted(set(a.priority_classes))), []).append(a)
    for index, (classes, members) in enumerate(sorted(by_classes.items())):
        name = OTHER_CLASSES_QUOTA_NAME if index == 0 else f"{OTHER_CLASSES_QUOTA_NAME}-{index + 1}"
        quotas.append(
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": _metadata(plan, name, namespace=ns.name, team=ns.team.slug),
                "spec": {
                    "hard": {_quota_key(a): "0" for a in members},
                    "scopeSelector": {
                        "matchExpressions": [
                            {
                                "scopeName": "PriorityClass",
                                "operator": "NotIn",
                                "values": list(classes),
                            }
                        ]
                    },
                },
            }
        )
    return quotas


def render_limit_range(plan: ClusterPlan, ns: NamespacePlan) -> dict | None:
    """``gpu-limits`` with ``max`` per pod for allocations that have a per-pod max, else None.

    ``type: Pod``: the LimitRanger sums the limits of all containers of a pod (init containers
    count with their maximum) and checks the sum against ``max``; a per-pod cap is exactly that.
    ``type: Container`` would check each container on its own, so a pod of two containers could
    take twice the cap. ``max`` only, never ``default``/``defaultRequest``: a default would be
    injected into every container, also into pods that use no GPU.

    Caveat (LimitRanger ``maxConstraint``): a pod that does not state a limit for a resource
    with a ``max`` is rejected ("No limit is specified"), and for ``type: Pod`` the sum only
    exists when every regular container states it. Pods in such a namespace must declare the
    resource, with ``0`` where they use none.
    """
    maxima = {
        a.resource.name: _amount(a, a.per_pod_max)
        for a in _sorted_allocations(ns)
        if a.per_pod_max is not None
    }
    if not maxima:
        return None
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": _metadata(plan, LIMIT_RANGE_NAME, namespace=ns.name, team=ns.team.slug),
        "spec": {"limits": [{"type": "Pod", "max": maxima}]},
    }


def render_priority_classes(plan: ClusterPlan) -> list[dict]:
    """One ``PriorityClass`` per plan priority class; never the global default."""
    objects = []
    for pc in sorted(plan.priority_classes, key=lambda p: p.name):
        objects.append(render_priority_class(plan, pc))
    return objects


def render_priority_class(plan: ClusterPlan, pc: PriorityClassPlan) -> dict:
    obj: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": _metadata(plan, pc.name),
        "value": int(pc.value),
        "globalDefault": False,
        "preemptionPolicy": "PreemptLowerPriority" if pc.preempts else "Never",
    }
    if pc.description:
        obj["description"] = pc.description
    return obj


# --------------------------------------------------------------------------------------------
# Volcano


def volcano_weight(allocations: Iterable[AllocationPlan]) -> int:
    """Queue weight: the guaranteed accelerators (whole GPUs + MIG slices), rounded up, >= 1.

    Only the proportion plugin reads ``weight`` (the capacity plugin uses ``deserved``); deriving
    it from the guarantee keeps both plugins dividing the cluster in the same ratio. vGPU memory /
    cores and cpu/memory are in other units and do not count.
    """
    total = sum(
        (a.guarantee for a in allocations if a.resource.kind in _ACCELERATOR_KINDS), Decimal(0)
    )
    return max(1, min(_MAX_INT32, math.ceil(total)))


def _volcano_queue(
    plan: ClusterPlan,
    name: str,
    team: str,
    parent: str | None,
    deserved: dict[str, str],
    capability: dict[str, str],
    guarantee: dict[str, str],
    weight: int,
) -> dict:
    spec: dict[str, Any] = {
        "capability": capability,
        "deserved": deserved,
        "reclaimable": True,
        "weight": weight,
        # Top-level queues hang below Volcano's built-in "root" queue (the webhook and the
        # controllers treat "" and "root" alike; stating it keeps the tree explicit).
        "parent": parent or VOLCANO_ROOT_QUEUE,
    }
    if guarantee:
        spec["guarantee"] = {"resource": guarantee}
    return {
        "apiVersion": VOLCANO_API,
        "kind": "Queue",
        "metadata": _metadata(plan, name, team=team),
        "spec": spec,
    }


def render_volcano_queues(plan: ClusterPlan) -> list[dict]:
    """Department queues and one ``Queue`` per team namespace with allocations.

    deserved = guarantee, capability = cap (so capability >= deserved), ``guarantee.resource``
    = guarantee only for inference namespaces (capacity that must never be lent). A department
    queue carries the sums of the namespaces below it, because Volcano's queue webhook rejects a
    child whose capability exceeds an ancestor's, or children whose deserved / guarantee sums
    exceed the parent's.
    """
    if "volcano" not in plan.backends:
        return []
    namespaces = _with_allocations(plan)
    names = {ns.name for ns in namespaces}
    objects = []
    for dept, (parent, members) in _departments(plan).items():
        if dept in names:
            raise ValueError(f"department {dept!r} and a team namespace share a Volcano queue name")
        totals = _resource_totals(members)
        inference = _resource_totals(m for m in members if m.workload_class == "inference")
        objects.append(
            _volcano_queue(
                plan,
                dept,
                dept,
                parent,
                deserved={n: _amount(a, g) for n, (a, g, _) in totals.items()},
                capability={n: _amount(a, c) for n, (a, _, c) in totals.items()},
                guarantee={n: _amount(a, g) for n, (a, g, _) in inference.items()},
                weight=min(_MAX_INT32, sum(volcano_weight(m.allocations) for m in members)),
            )
        )
    for ns in namespaces:
        objects.append(render_volcano_queue(plan, ns))
    return objects


def render_volcano_queue(plan: ClusterPlan, ns: NamespacePlan) -> dict:
    """The Volcano ``Queue`` of one team namespace (named after it)."""
    allocations = _sorted_allocations(ns)
    deserved = {a.resource.name: _amount(a, a.guarantee) for a in allocations}
    return _volcano_queue(
        plan,
        ns.name,
        ns.team.slug,
        ns.team.ancestors[0] if ns.team.ancestors else None,
        deserved=deserved,
        capability={a.resource.name: _amount(a, a.cap) for a in allocations},
        guarantee=dict(deserved) if ns.workload_class == "inference" else {},
        weight=volcano_weight(allocations),
    )


# --------------------------------------------------------------------------------------------
# Kueue


def _cohort_of(plan: ClusterPlan, ns: NamespacePlan) -> str:
    return ns.team.ancestors[0] if ns.team.ancestors else plan.kueue_cohort


def render_cluster_queue(plan: ClusterPlan, ns: NamespacePlan) -> dict:
    """The Kueue ``ClusterQueue`` of one team namespace (named after it).

    One resource group per flavor (Kueue wants every covered resource listed for every flavor
    of a group, and a flavor in one group only): nominalQuota = guarantee, borrowingLimit =
    cap - guarantee (always stated, 0 included: no borrowingLimit means unlimited borrowing).
    Inference namespaces also get lendingLimit 0, Kueue's way of never lending the guarantee.
    ``reclaimWithinCohort: Any`` lets a team take its nominal quota back from borrowers (the
    guarantee is a floor), ``withinClusterQueue: LowerPriority`` lets its own priority classes
    preempt each other.
    """
    groups: dict[str, list[AllocationPlan]] = {}
    for a in _sorted_allocations(ns):
        groups.setdefault(flavor_name(a.resource.gpu_model), []).append(a)
    resource_groups = []
    for flavor, members in sorted(groups.items()):
        resources = []
        for a in members:
            entry = {
                "name": a.resource.name,
                "nominalQuota": _amount(a, a.guarantee),
                "borrowingLimit": _amount(a, a.cap - a.guarantee),
            }
            if ns.workload_class == "inference":
                entry["lendingLimit"] = "0"
            resources.append(entry)
        resource_groups.append(
            {
                "coveredResources": [a.resource.name for a in members],
                "flavors": [{"name": flavor, "resources": resources}],
            }
        )
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": _metadata(plan, ns.name, team=ns.team.slug),
        "spec": {
            "cohortName": _cohort_of(plan, ns),
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns.name}},
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
            "resourceGroups": resource_groups,
        },
    }


def render_local_queue(plan: ClusterPlan, ns: NamespacePlan) -> dict:
    """``LocalQueue`` ``default`` in the namespace, pointing at its ClusterQueue."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": _metadata(plan, LOCAL_QUEUE_NAME, namespace=ns.name, team=ns.team.slug),
        "spec": {"clusterQueue": ns.name},
    }


def render_kueue_objects(plan: ClusterPlan) -> list[dict]:
    """ResourceFlavors, Cohorts (root cohort and the department chain), ClusterQueues and
    LocalQueues of the namespaces with allocations."""
    if "kueue" not in plan.backends:
        return []
    namespaces = _with_allocations(plan)
    if not namespaces:
        return []
    objects: list[dict] = []
    flavors = sorted(
        {flavor_name(a.resource.gpu_model) for ns in namespaces for a in ns.allocations}
    )
    for flavor in flavors:
        objects.append(
            {
                "apiVersion": KUEUE_API,
                "kind": "ResourceFlavor",
                "metadata": _metadata(plan, flavor),
                "spec": {},
            }
        )
    objects.append(
        {
            "apiVersion": KUEUE_API,
            "kind": "Cohort",
            "metadata": _metadata(plan, plan.kueue_cohort),
            "spec": {},
        }
    )
    names = {ns.name for ns in namespaces}
    for dept, (parent, _members) in _departments(plan).items():
        if dept == plan.kueue_cohort or dept in names:
            raise ValueError(f"department {dept!r} clashes with a Kueue cohort or queue name")
        objects.append(
            {
                "apiVersion": KUEUE_API,
                "kind": "Cohort",
                "metadata": _metadata(plan, dept, team=dept),
                "spec": {"parentName": parent or plan.kueue_cohort},
            }
        )
    for ns in namespaces:
        objects.append(render_cluster_queue(plan, ns))
        objects.append(render_local_queue(plan, ns))
    return objects


# --------------------------------------------------------------------------------------------
# YuniKorn


def _yunikorn_resource(name: str) -> str:
    return {"cpu": "vcore", "memory": "memory"}.get(name, name)


def _yunikorn_resources(totals: dict[str, tuple[AllocationPlan, Decimal, Decimal]]) -> dict:
    guaranteed, maximum = {}, {}
    for name, (a, guarantee, cap) in totals.items():
        key = _yunikorn_resource(name)
        suffix = a.resource.quantity_suffix
        guaranteed[key] = _yunikorn_quantity(guarantee, name, suffix)
        maximum[key] = _yunikorn_quantity(cap, name, suffix)
    return {"guaranteed": guaranteed, "max": maximum}


def yunikorn_queues_yaml(plan: ClusterPlan) -> str:
    """The ``queues.yaml`` text: one leaf queue per team namespace with allocations, nested
    below its department queues (which carry the sums, as YuniKorn checks children against
    their parent).

    Placement: the ``tag``/``namespace`` rule only finds ``root.<namespace>``, so each
    department path gets a rule of its own whose ``fixed`` parent rule names the department
    queue; ``create: false`` everywhere (only configured queues exist), the plain rule last.
    """
    namespaces = _with_allocations(plan)
    departments = _departments(plan)

    def leaf(ns: NamespacePlan) -> dict:
        return {"name": ns.name, "resources": _yunikorn_resources(_resource_totals([ns]))}

    def children_of(parent: str | None) -> list[dict]:
        nodes = [leaf(ns) for ns in namespaces if (ns.team.ancestors[:1] or [None])[0] == parent]
        for dept, (dept_parent, members) in departments.items():
            if dept_parent == parent:
                nodes.append(
                    {
                        "name": dept,
                        "parent": True,
                        "resources": _yunikorn_resources(_resource_totals(members)),
                        "queues": children_of(dept),
                    }
                )
        return sorted(nodes, key=lambda q: q["name"])

    paths = sorted(
        {"root." + ".".join(reversed(ns.team.ancestors)) for ns in namespaces if ns.team.ancestors}
    )
    rules: list[dict[str, Any]] = [
        {
            "name": "tag",
            "value": "namespace",
            "create": False,
            "parent": {"name": "fixed", "value": path},
        }
        for path in paths
    ]
    rules.append({"name": "tag", "value": "namespace", "create": False})
    config = {
        "partitions": [
            {
                "name": "default",
                "placementrules": rules,
                "queues": [{"name": "root", "submitacl": "*", "queues": children_of(None)}],
            }
        ]
    }
    return yaml.safe_dump(config, sort_keys=True, default_flow_style=False)


def render_yunikorn_configmap(plan: ClusterPlan) -> dict | None:
    """ConfigMap ``yunikorn-configs`` (shared: managed-by label only), or None without YuniKorn."""
    if "yunikorn" not in plan.backends:
        return None
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(plan, YUNIKORN_CONFIGMAP_NAME, namespace=plan.yunikorn_namespace),
        "data": {YUNIKORN_QUEUES_KEY: yunikorn_queues_yaml(plan)},
    }


# --------------------------------------------------------------------------------------------
# Whole cluster / one namespace


def _sorted_for_apply(objects: list[dict]) -> list[dict]:
    """Namespaces, cluster-scoped kinds, namespaced kinds; parents before children."""
    parents: dict[tuple[str, str], str] = {}
    for obj in objects:
        spec = obj.get("spec") or {}
        parent = spec.get("parent") or spec.get("parentName")
        if obj["kind"] in ("Queue", "Cohort") and parent:
            parents[(obj["kind"], obj["metadata"]["name"])] = parent

    def depth(obj: dict) -> int:
        seen: set[str] = set()
        name, level = obj["metadata"]["name"], 0
        while (obj["kind"], name) in parents and name not in seen:
            seen.add(name)
            name = parents[(obj["kind"], name)]
            level += 1
        return level

    def key(obj: dict) -> tuple:
        api_version, kind, namespace, name = object_key(obj)
        return (_KIND_ORDER.get((api_version, kind), 99), depth(obj), namespace, name, kind)

    return sorted(objects, key=key)


def render_namespace(plan: ClusterPlan, ns: NamespacePlan) -> list[dict]:
    """Objects that belong to one team namespace: the Namespace, its quotas and LimitRange,
    and, per backend, its Volcano Queue or Kueue ClusterQueue + LocalQueue.

    Shared objects (PriorityClasses, department queues, cohorts, flavors, the YuniKorn
    ConfigMap) are only in :func:`render_cluster`.
    """
    objects = [render_namespace_object(plan, ns), *render_resource_quotas(plan, ns)]
    limit_range = render_limit_range(plan, ns)
    if limit_range is not None:
        objects.append(limit_range)
    if ns.allocations:
        if "volcano" in plan.backends:
            objects.append(render_volcano_queue(plan, ns))
        if "kueue" in plan.backends:
            objects += [render_cluster_queue(plan, ns), render_local_queue(plan, ns)]
    return _sorted_for_apply(objects)


def render_cluster(plan: ClusterPlan) -> list[dict]:
    """Every desired object of the cluster, in apply order, deterministic."""
    objects: list[dict] = []
    for ns in plan.namespaces:
        objects.append(render_namespace_object(plan, ns))
        objects += render_resource_quotas(plan, ns)
        limit_range = render_limit_range(plan, ns)
        if limit_range is not None:
            objects.append(limit_range)
    objects += render_priority_classes(plan)
    objects += render_volcano_queues(plan)
    objects += render_kueue_objects(plan)
    configmap = render_yunikorn_configmap(plan)
    if configmap is not None:
        objects.append(configmap)
    counts = Counter(object_key(o) for o in objects)
    duplicates = sorted(k for k, n in counts.items() if n > 1)
    if duplicates:
        raise ValueError(f"plan renders the same object more than once: {duplicates}")
    return _sorted_for_apply(objects)
