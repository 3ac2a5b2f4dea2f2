"""Render a :class:`~quotas.kube.plan.ClusterPlan` into the Kubernetes objects it stands for.

Pure functions over the frozen plan dataclasses: no I/O, no Django. Every function returns plain
``dict`` objects (apiVersion, kind, metadata, spec/data ...) ready to be applied, validated with
``kubesandbox.schemas.validate_object`` or dumped as YAML. Same plan in, same objects out, in the
same order (``render_cluster`` sorts them for applying).

Mapping (see shared/PRODUCT.md, "How an allocation maps onto cluster objects"):

- core: ``Namespace`` labels and annotations; ``ResourceQuota`` ``gpu-quota`` with the caps,
  plus ``gpu-quota-other-classes`` (hard 0 on ``requests.`` keys for pods outside the allowed
  priority classes); ``PriorityClass`` objects.
- per-pod max: one cluster-wide ``ValidatingAdmissionPolicy`` + binding that reads each
  namespace's maxima from its annotations (never a LimitRange: see
  :func:`render_per_pod_max_policy`).
- Volcano: one cluster-scoped ``Queue`` per team namespace (deserved = guarantee, capability =
  cap) under department queues; the Namespace names its queue in an annotation.
- Kueue (v1beta2): ``ResourceFlavor`` per GPU model plus ``default-flavor``, ``Cohort`` chain
  whose root holds the capacity nobody is guaranteed, ``ClusterQueue`` per team namespace
  (nominalQuota = guarantee, borrowingLimit = cap - guarantee, cpu and memory always covered),
  LocalQueue ``default``.
- YuniKorn: ``queues.yaml`` in ConfigMap ``yunikorn-configs``, with a catch-all placement rule.

The generation annotation is not rendered: the sync engine adds it when it writes.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

import yaml

from common.amounts import format_amount
from quotas.kube.objects import ObjectKey, kube_object
from quotas.kube.plan import (
    AllocationPlan,
    ClusterPlan,
    NamespacePlan,
    PriorityClassPlan,
    ResourcePlan,
)

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
TEAM_LABEL = "quota-portal/team"
# Which portal cluster wrote the object: a sync only ever prunes objects of its own cluster,
# even when two portal clusters are pointed at the same API server by mistake.
CLUSTER_LABEL = "quota-portal/cluster"
WORKLOAD_LABEL = "quota-portal/workload-class"
GENERATION_ANNOTATION = "quota-portal/generation"

RESOURCE_QUOTA_NAME = "gpu-quota"
OTHER_CLASSES_QUOTA_NAME = "gpu-quota-other-classes"
LOCAL_QUEUE_NAME = "default"
YUNIKORN_CONFIGMAP_NAME = "yunikorn-configs"
YUNIKORN_QUEUES_KEY = "queues.yaml"
# Where YuniKorn places pods of namespaces the portal does not manage (see yunikorn_queues_yaml).
YUNIKORN_DEFAULT_QUEUE = "default"
VOLCANO_ROOT_QUEUE = "root"
# The Namespace annotation Volcano's PodGroup admission reads to route the namespace's PodGroups
# (volcano-sh/volcano: schedulingv1beta1.QueueNameAnnotationKey, read in mutate_podgroup.go).
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
# The Queue CRD's bounds on spec.weight.
VOLCANO_MAX_WEIGHT = 65535
DEFAULT_FLAVOR = "default-flavor"
# The per-pod max admission policy and its binding (one each per cluster).
PER_POD_MAX_POLICY_NAME = "quota-portal-per-pod-max"
PER_POD_MAX_ANNOTATION_PREFIX = "quota-portal/per-pod-max."

VOLCANO_API = "scheduling.volcano.sh/v1beta1"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
ADMISSION_API = "admissionregistration.k8s.io/v1"

# HAMi vGPU resources are enforced by HAMi's own quota manager, which reads only
# ``limits.<resource>`` keys (limits.nvidia.com/gpumem, limits.nvidia.com/gpucores); everything
# else is quota'd on requests (the only prefix Kubernetes' own quota evaluator tracks for
# extended resources).
_LIMIT_KINDS = frozenset({"vgpu_memory", "vgpu_cores"})
# Kinds that count as accelerators when deriving a Volcano weight.
_ACCELERATOR_KINDS = frozenset({"gpu", "mig"})
# Resources every pod requests: a Kueue ClusterQueue that does not cover them never admits it.
_KUEUE_BASE_RESOURCES = ("cpu", "memory")
# "Unbounded" cpu / memory for Kueue, in base units (cores, bytes): far above any cluster, and
# far below int64 (Kueue sums quotas as int64 milli-cpu / bytes up the cohort tree).
_KUEUE_UNBOUNDED = {"cpu": Decimal(10**9), "memory": Decimal(2**60)}

# Apply order: namespaces, then cluster-scoped objects, then namespaced objects.
_KIND_ORDER = {
    ("v1", "Namespace"): 0,
    ("scheduling.k8s.io/v1", "PriorityClass"): 1,
    (ADMISSION_API, "ValidatingAdmissionPolicy"): 2,
    (ADMISSION_API, "ValidatingAdmissionPolicyBinding"): 3,
    (KUEUE_API, "ResourceFlavor"): 4,
    (KUEUE_API, "Cohort"): 5,
    (VOLCANO_API, "Queue"): 6,
    (KUEUE_API, "ClusterQueue"): 7,
    ("v1", "ResourceQuota"): 8,
    (KUEUE_API, "LocalQueue"): 9,
    ("v1", "ConfigMap"): 10,
}


# --------------------------------------------------------------------------------------------
# Quantities


# Suffix -> (base, exponent): the units of the Kubernetes quantity grammar, largest first.
_BINARY_UNITS = {"Ei": 6, "Pi": 5, "Ti": 4, "Gi": 3, "Mi": 2, "Ki": 1, "": 0}
_DECIMAL_UNITS = {"E": 18, "P": 15, "T": 12, "G": 9, "M": 6, "k": 3, "": 0, "m": -3, "n": -9}


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
        return format_amount(amount) + suffix
    base = _in_base_units(amount, suffix)
    if base is None:
        # Not a suffix of the quantity grammar: leave it as given (validation will say so).
        return format_amount(amount) + suffix
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
            return format_amount(value) + unit
    return format_amount(amount) + suffix


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


def per_pod_max_annotation(resource_name: str) -> str:
    """The Namespace annotation that carries the per-pod max of ``resource_name``.

    ``quota-portal/per-pod-max.nvidia.com_gpu``: the name part of an annotation key allows no
    ``/`` and at most 63 characters, so ``/`` becomes ``_`` and a name too long is cut and
    suffixed with a hash of the whole resource name (still one key per resource).
    """
    name = PER_POD_MAX_ANNOTATION_PREFIX.split("/", 1)[1] + resource_name.replace("/", "_")
    if len(name) > 63:
        digest = hashlib.sha256(resource_name.encode()).hexdigest()[:10]
        name = name[:52].rstrip("-_.") + "-" + digest
    return PER_POD_MAX_ANNOTATION_PREFIX.split("/", 1)[0] + "/" + name


def _per_pod_maxima(ns: NamespacePlan) -> dict[str, str]:
    return {
        a.resource.name: _amount(a, a.per_pod_max)
        for a in _sorted_allocations(ns)
        if a.per_pod_max is not None
    }


def render_namespace_object(plan: ClusterPlan, ns: NamespacePlan) -> dict:
    """The team ``Namespace``: labels, and annotations for the per-pod maxima (read by the
    admission policy) and, with Volcano, the queue its PodGroups go to.

    Volcano's PodGroup admission puts a PodGroup that names no queue into the queue named by
    the namespace annotation ``scheduling.volcano.sh/queue-name``; without it every team job
    lands in Volcano's ``default`` queue. Only a namespace with allocations has a queue.
    """
    meta: dict[str, Any] = {
        "name": ns.name,
        "labels": _labels(plan, ns.team.slug, **{WORKLOAD_LABEL: ns.workload_class}),
    }
    annotations = {
        per_pod_max_annotation(name): amount for name, amount in _per_pod_maxima(ns).items()
    }
    if "volcano" in plan.backends and ns.allocations:
        annotations[VOLCANO_QUEUE_ANNOTATION] = ns.name
    if annotations:
        meta["annotations"] = dict(sorted(annotations.items()))
    return kube_object("v1", "Namespace", meta)


def render_resource_quotas(plan: ClusterPlan, ns: NamespacePlan) -> list[dict]:
    """``gpu-quota`` (the caps) and, for allocations limited to priority classes, the
    ``gpu-quota-other-classes`` quota that gives every other class zero.

    The zero quota uses ``requests.`` keys only, HAMi's vGPU resources included: HAMi's quota
    manager (Project-HAMi/HAMi pkg/device/quota.go) reads every ``limits.<vGPU resource>`` key
    of every ResourceQuota of the namespace and ignores ``scopeSelector``, so a scoped
    ``limits.nvidia.com/gpumem: 0`` would become the namespace's whole vGPU limit (block all)
    or be overwritten by ``gpu-quota``'s, depending on the order it sees them; Kubernetes
    itself does not count ``limits.`` of extended resources. ``requests.nvidia.com/gpumem``
    (requests default to the limits HAMi pods state) is what Kubernetes' quota counts.

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
        kube_object(
            "v1",
            "ResourceQuota",
            _metadata(plan, RESOURCE_QUOTA_NAME, namespace=ns.name, team=ns.team.slug),
            spec={"hard": {_quota_key(a): _amount(a, a.cap) for a in allocations}},
        )
    ]
    # One "other classes" quota per distinct set of allowed classes (usually just one).
    by_classes: dict[tuple[str, ...], list[AllocationPlan]] = {}
    for a in allocations:
        if a.priority_classes:
            by_classes.setdefault(tuple(sorted(set(a.priority_classes))), []).append(a)
    for index, (classes, members) in enumerate(sorted(by_classes.items())):
        name = OTHER_CLASSES_QUOTA_NAME if index == 0 else f"{OTHER_CLASSES_QUOTA_NAME}-{index + 1}"
        quotas.append(
            kube_object(
                "v1",
                "ResourceQuota",
                _metadata(plan, name, namespace=ns.name, team=ns.team.slug),
                spec={
                    "hard": {f"requests.{a.resource.name}": "0" for a in members},
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
            )
        )
    return quotas


def _cel_limit(resource: str) -> str:
    """CEL: the limit a container ``c`` states for ``resource``, 0.0 when it states none."""
    return (
        f"has(c.resources) && has(c.resources.limits) && '{resource}' in c.resources.limits"
        f" ? quantity(c.resources.limits['{resource}']).asApproximateFloat() : 0.0"
    )


def render_per_pod_max_policy(plan: ClusterPlan) -> list[dict]:
    """The ``ValidatingAdmissionPolicy`` and its binding that hold pods to the per-pod max of
    their namespace, or nothing when no namespace has a per-pod max.

    Why not a LimitRange: a ``type: Pod`` max rejects every pod that states no limit for the
    resource (CPU-only pods, injected sidecars, controller pods), and a ``type: Container``
    max defaults every container's limit to the max.

    Design: one policy and one binding for the whole cluster; each namespace's maxima are
    annotations on its Namespace (:func:`per_pod_max_annotation`, a quantity such as "8"),
    read through ``namespaceObject``. That scales to thousands of namespaces (two objects, the
    API server caches namespaces) and has no parameter objects that could be missing: a
    namespace without the annotation, or a pod that states no limit for the resource, is
    admitted. Not a ConfigMap parameter (``paramKind``): a ConfigMap in the team's namespace is
    writable by anyone with the usual ``edit`` role, the cluster-scoped Namespace is not.

    Per resource with a per-pod max anywhere in the cluster, one validation compares what the
    pod states with the max, counted the way Kubernetes computes a pod's effective limit:
    sidecars (init containers with ``restartPolicy: Always``) + the larger of the sum of the
    regular containers and the largest other init container. (Kubernetes adds only the sidecars
    started before an init container to it; adding all of them never counts less.) Amounts are
    compared as floats with half the smallest unit as tolerance (1m cpu, 1 for the rest), so
    float sums never reject a pod that is exactly at its max. Only standard CEL and the
    Kubernetes ``quantity()`` and list ``sum()`` functions are used.

    Only ``CREATE`` of pods and ``UPDATE`` of ``pods/resize`` (in-place resize) are checked:
    checking every pod update would block label or finalizer changes of pods created before
    a max was lowered. The rules state ``scope`` (the API server would default it): the list is
    replaced as a whole on apply, so a defaulted field in it would be a change every time.
    ``failurePolicy: Fail``: a cap is not bypassed when an expression
    fails (e.g. a hand-edited annotation that is not a quantity); the namespace selector keeps
    the policy to the namespaces this portal cluster manages.
    """
    resources = sorted({name for ns in plan.namespaces for name in _per_pod_maxima(ns)})
    if not resources:
        return []
    variables = [
        {
            "name": "initContainers",
            "expression": "has(object.spec.initContainers) ? object.spec.initContainers : []",
        },
        {
            "name": "sidecars",
            "expression": "variables.initContainers.filter(c, has(c.restartPolicy)"
            " && c.restartPolicy == 'Always')",
        },
        {
            "name": "oneShotInitContainers",
            "expression": "variables.initContainers.filter(c, !has(c.restartPolicy)"
            " || c.restartPolicy != 'Always')",
        },
    ]
    validations = []
    for index, resource in enumerate(resources):
        v = f"r{index}"
        key = per_pod_max_annotation(resource)
        limit = _cel_limit(resource)
        maximum = f"namespaceObject.metadata.annotations['{key}']"
        tolerance = "0.0005" if resource == "cpu" else "0.5"
        variables += [
            {
                "name": f"{v}HasMax",
                "expression": "has(namespaceObject.metadata.annotations)"
                f" && '{key}' in namespaceObject.metadata.annotations",
            },
            {
                # The max plus the tolerance; only read when the namespace has one.
                "name": f"{v}Max",
                "expression": f"variables.{v}HasMax"
                f" ? quantity({maximum}).asApproximateFloat() + {tolerance} : 0.0",
            },
            {
                "name": f"{v}Containers",
                "expression": f"([0.0] + object.spec.containers.map(c, {limit})).sum()",
            },
            {
                "name": f"{v}Sidecars",
                "expression": f"([0.0] + variables.sidecars.map(c, {limit})).sum()",
            },
            {
                "name": f"{v}Running",
                "expression": f"variables.{v}Sidecars + variables.{v}Containers",
            },
        ]
        # sidecars + max(containers, each init container) <= max, written without a max():
        # the running containers fit, and every init container fits next to the sidecars.
        init_fits = (
            f"variables.oneShotInitContainers.all(c, variables.{v}Sidecars + ({limit})"
            f" <= variables.{v}Max)"
        )
        validations.append(
            {
                "expression": f"!variables.{v}HasMax || (variables.{v}Running"
                f" <= variables.{v}Max && {init_fits})",
                "message": f"the pod's {resource} limits exceed the per-pod max of its namespace",
                "messageExpression": f"(variables.{v}Running <= variables.{v}Max"
                f" ? 'an init container of the pod states more {resource} in limits'"
                f" : 'the containers of the pod state ' + string(variables.{v}Running)"
                f" + ' {resource} in limits')"
                f" + ', above the per-pod max ' + {maximum} + ' of namespace '"
                " + namespaceObject.metadata.name",
                "reason": "Forbidden",
            }
        )
    namespace_selector = {
        "matchLabels": {MANAGED_BY_LABEL: plan.managed_by, CLUSTER_LABEL: plan.name}
    }
    policy = kube_object(
        ADMISSION_API,
        "ValidatingAdmissionPolicy",
        _metadata(plan, PER_POD_MAX_POLICY_NAME),
        spec={
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": namespace_selector,
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                        "scope": "Namespaced",
                    },
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["UPDATE"],
                        "resources": ["pods/resize"],
                        "scope": "Namespaced",
                    },
                ],
            },
            "variables": variables,
            "validations": validations,
        },
    )
    binding = kube_object(
        ADMISSION_API,
        "ValidatingAdmissionPolicyBinding",
        _metadata(plan, PER_POD_MAX_POLICY_NAME),
        spec={"policyName": PER_POD_MAX_POLICY_NAME, "validationActions": ["Deny"]},
    )
    return [policy, binding]


def render_priority_classes(plan: ClusterPlan) -> list[dict]:
    """One ``PriorityClass`` per plan priority class; never the global default."""
    objects = []
    for pc in sorted(plan.priority_classes, key=lambda p: p.name):
        objects.append(render_priority_class(plan, pc))
    return objects


def render_priority_class(plan: ClusterPlan, pc: PriorityClassPlan) -> dict:
    # ``globalDefault`` is left out rather than stated false: the API server omits a false one
    # when it answers, so a stated false would read back as drift on every sync.
    obj: dict[str, Any] = kube_object(
        "scheduling.k8s.io/v1",
        "PriorityClass",
        _metadata(plan, pc.name),
        value=int(pc.value),
        preemptionPolicy="PreemptLowerPriority" if pc.preempts else "Never",
    )
    if pc.description:
        obj["description"] = pc.description
    return obj


# --------------------------------------------------------------------------------------------
# Volcano


def volcano_weight(allocations: Iterable[AllocationPlan]) -> int:
    """Queue weight: the guaranteed accelerators (whole GPUs + MIG slices), rounded up, within
    the 1..65535 the Queue CRD allows.

    Only the proportion plugin reads ``weight`` (the capacity plugin uses ``deserved``); deriving
    it from the guarantee keeps both plugins dividing the cluster in the same ratio. vGPU memory /
    cores and cpu/memory are in other units and do not count.
    """
    total = sum(
        (a.guarantee for a in allocations if a.resource.kind in _ACCELERATOR_KINDS), Decimal(0)
    )
    return max(1, min(VOLCANO_MAX_WEIGHT, math.ceil(total)))


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
    return kube_object(VOLCANO_API, "Queue", _metadata(plan, name, team=team), spec=spec)


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
                weight=min(VOLCANO_MAX_WEIGHT, sum(volcano_weight(m.allocations) for m in members)),
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


def _base_units(amount: Decimal, resource: ResourcePlan) -> Decimal:
    """``amount`` (in units of the resource's suffix) in base units: cores, bytes, devices."""
    base = _in_base_units(Decimal(amount), resource.quantity_suffix)
    return Decimal(amount) if base is None else base


def _base_quantity(amount: Decimal, resource_name: str) -> str:
    """A quantity for an amount in base units; memory in the largest binary unit that fits."""
    if resource_name == "memory":
        for unit, exponent in _BINARY_UNITS.items():
            size = Decimal(1024) ** exponent
            if exponent and amount % size == 0:
                return format_amount(amount / size) + unit
    return quantity(amount)


def _resource_groups(by_flavor: dict[str, dict[str, dict]]) -> list[dict]:
    """Kueue ``resourceGroups``: one group per flavor, listing every resource of the flavor.

    Kueue's rules (CRD CEL rule and webhook): a resource and a flavor appear in one group only,
    and every flavor of a group lists exactly the group's covered resources, in their order.
    A resource always maps to one flavor (its GPU model), so one group per flavor keeps them.
    """
    groups = []
    for flavor, entries in sorted(by_flavor.items()):
        names = sorted(entries)
        groups.append(
            {
                "coveredResources": names,
                "flavors": [{"name": flavor, "resources": [entries[n] for n in names]}],
            }
        )
    return groups


def render_cluster_queue(plan: ClusterPlan, ns: NamespacePlan) -> dict:
    """The Kueue ``ClusterQueue`` of one team namespace (named after it).

    nominalQuota = guarantee, borrowingLimit = cap - guarantee (always stated, 0 included: no
    borrowingLimit means unlimited borrowing). Inference namespaces also get lendingLimit 0,
    Kueue's way of never lending the guarantee. ``reclaimWithinCohort: Any`` lets a team take
    its nominal quota back from borrowers (the guarantee is a floor), ``withinClusterQueue:
    LowerPriority`` lets its own priority classes preempt each other.

    ``cpu`` and ``memory`` are always covered (``default-flavor``): Kueue leaves a workload
    pending for good when it requests a resource its ClusterQueue does not cover, and every
    real pod requests both. Without an allocation of them the namespace has nominalQuota 0 and
    no borrowingLimit: it uses the cluster's pool in the root Cohort, unlimited within it.
    """
    by_flavor: dict[str, dict[str, dict]] = {}
    for a in _sorted_allocations(ns):
        entry = {
            "name": a.resource.name,
            "nominalQuota": _amount(a, a.guarantee),
            "borrowingLimit": _amount(a, a.cap - a.guarantee),
        }
        if ns.workload_class == "inference":
            entry["lendingLimit"] = "0"
        by_flavor.setdefault(flavor_name(a.resource.gpu_model), {})[a.resource.name] = entry
    allocated = {a.resource.name for a in ns.allocations}
    for name in _KUEUE_BASE_RESOURCES:
        if name not in allocated:
            by_flavor.setdefault(DEFAULT_FLAVOR, {})[name] = {"name": name, "nominalQuota": "0"}
    return kube_object(
        KUEUE_API,
        "ClusterQueue",
        _metadata(plan, ns.name, team=ns.team.slug),
        spec={
            "cohortName": _cohort_of(plan, ns),
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns.name}},
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
            "resourceGroups": _resource_groups(by_flavor),
        },
    )


def _kueue_total(plan: ClusterPlan, name: str, capacities: dict) -> Decimal | None:
    """What Kueue may admit of a resource in the whole cluster, in base units (None: unknown).

    cpu / memory: the cluster's Kueue pool setting, else the recorded capacity.
    """
    if name == "cpu" and plan.kueue_cpu_pool is not None:
        return Decimal(plan.kueue_cpu_pool)
    if name == "memory" and plan.kueue_memory_pool_gib is not None:
        return Decimal(plan.kueue_memory_pool_gib) * Decimal(1024) ** 3
    if name in capacities:
        resource, capacity = capacities[name]
        return _base_units(capacity, resource)
    return None


def render_root_cohort(plan: ClusterPlan) -> dict:
    """The root ``Cohort``: its own ``resourceGroups`` hold what nobody is guaranteed.

    Kueue lends a ClusterQueue only the unused nominal quota of its cohort tree: the sum of the
    ClusterQueues' nominal quotas (their guarantees) plus the Cohorts' own. Capacity nobody is
    guaranteed must therefore sit in the root Cohort, or no queue can ever borrow it (14 MIG
    slices of which 6 are guaranteed would admit only 6). Per resource any ClusterQueue covers:
    capacity - sum of all guarantees (never below 0; 0 when the capacity is not recorded), so
    the whole tree holds exactly the capacity. Guarantees with lendingLimit 0 stay in their
    ClusterQueue, but they are part of the capacity too, so they are subtracted as well.
    A root Cohort has no parent, so it states no borrowingLimit or lendingLimit (Kueue refuses
    them there). Department Cohorts carry no quota of their own: the caps are per namespace
    (each ClusterQueue's borrowingLimit), and a Cohort without limits passes the root's pool
    through to the queues below it.
    """
    capacities = {resource.name: (resource, amount) for resource, amount in plan.capacities}
    resources: dict[str, ResourcePlan] = {}
    guaranteed: dict[str, Decimal] = {}
    for ns in _with_allocations(plan):
        for a in ns.allocations:
            resources.setdefault(a.resource.name, a.resource)
            guaranteed[a.resource.name] = guaranteed.get(a.resource.name, Decimal(0)) + (
                _base_units(a.guarantee, a.resource)
            )
    for name in _KUEUE_BASE_RESOURCES:
        resources.setdefault(name, ResourcePlan(name=name, kind=name))
    by_flavor: dict[str, dict[str, dict]] = {}
    for name, resource in sorted(resources.items()):
        total = _kueue_total(plan, name, capacities)
        if total is None:
            # Unknown cpu / memory: unbounded (the portal then gates only what it allocates,
            # the node scheduler still places pods). Unknown GPU capacity: no shared pool.
            own = _KUEUE_UNBOUNDED.get(name, Decimal(0))
        else:
            own = max(Decimal(0), total - guaranteed.get(name, Decimal(0)))
        by_flavor.setdefault(flavor_name(resource.gpu_model), {})[name] = {
            "name": name,
            "nominalQuota": _base_quantity(own, name),
        }
    return kube_object(
        KUEUE_API,
        "Cohort",
        _metadata(plan, plan.kueue_cohort),
        spec={"resourceGroups": _resource_groups(by_flavor)},
    )


def render_local_queue(plan: ClusterPlan, ns: NamespacePlan) -> dict:
    """``LocalQueue`` ``default`` in the namespace, pointing at its ClusterQueue."""
    return kube_object(
        KUEUE_API,
        "LocalQueue",
        _metadata(plan, LOCAL_QUEUE_NAME, namespace=ns.name, team=ns.team.slug),
        spec={"clusterQueue": ns.name},
    )


def render_kueue_objects(plan: ClusterPlan) -> list[dict]:
    """ResourceFlavors, Cohorts (root cohort and the department chain), ClusterQueues and
    LocalQueues of the namespaces with allocations."""
    if "kueue" not in plan.backends:
        return []
    namespaces = _with_allocations(plan)
    if not namespaces:
        return []
    objects: list[dict] = []
    root = render_root_cohort(plan)
    flavors = sorted(
        flavor["name"] for group in root["spec"]["resourceGroups"] for flavor in group["flavors"]
    )
    for flavor in flavors:
        objects.append(kube_object(KUEUE_API, "ResourceFlavor", _metadata(plan, flavor), spec={}))
    objects.append(root)
    names = {ns.name for ns in namespaces}
    for dept, (parent, _members) in _departments(plan).items():
        if dept == plan.kueue_cohort or dept in names:
            raise ValueError(f"department {dept!r} clashes with a Kueue cohort or queue name")
        objects.append(
            kube_object(
                KUEUE_API,
                "Cohort",
                _metadata(plan, dept, team=dept),
                spec={"parentName": parent or plan.kueue_cohort},
            )
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
    queue; ``create: false`` everywhere (only configured queues exist), then the plain rule.

    The catch-all comes last: a ``fixed`` rule to ``root.default``, a configured leaf queue
    without limits. YuniKorn rejects an application no rule places ("no placement rule
    matched"); only since 1.6 does it fall back to ``root.default`` by itself, and only when
    that queue exists. Its config validator rejects the whole ``queues.yaml`` when a
    ``create: false`` rule names a queue that is not configured, hence the queue is. ``fixed``
    with a fully qualified name takes no parent rule and places every application that reaches
    it, so pods of namespaces the portal does not manage run as they did before the portal.
    """
    namespaces = _with_allocations(plan)
    departments = _departments(plan)

    def leaf(ns: NamespacePlan) -> dict:
        return {"name": ns.name, "resources": _yunikorn_resources(_resource_totals([ns]))}

    def children_of(parent: str | None) -> list[dict]:
        nodes = [leaf(ns) for ns in namespaces if (ns.team.ancestors[:1] or [None])[0] == parent]
        if parent is None:
            if any(q["name"] == YUNIKORN_DEFAULT_QUEUE for q in nodes) or (
                YUNIKORN_DEFAULT_QUEUE in departments
            ):
                raise ValueError(
                    f"a team namespace or department named {YUNIKORN_DEFAULT_QUEUE!r} clashes "
                    "with YuniKorn's catch-all queue root.default"
                )
            nodes.append({"name": YUNIKORN_DEFAULT_QUEUE})
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
    rules.append({"name": "fixed", "value": f"root.{YUNIKORN_DEFAULT_QUEUE}", "create": False})
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
    return kube_object(
        "v1",
        "ConfigMap",
        _metadata(plan, YUNIKORN_CONFIGMAP_NAME, namespace=plan.yunikorn_namespace),
        data={YUNIKORN_QUEUES_KEY: yunikorn_queues_yaml(plan)},
    )


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
        api_version, kind, namespace, name = ObjectKey.of(obj)
        return (_KIND_ORDER.get((api_version, kind), 99), depth(obj), namespace, name, kind)

    return sorted(objects, key=key)


def render_namespace(plan: ClusterPlan, ns: NamespacePlan) -> list[dict]:
    """Objects that belong to one team namespace: the Namespace (with its per-pod maxima), its
    quotas and, per backend, its Volcano Queue or Kueue ClusterQueue + LocalQueue.

    Shared objects (PriorityClasses, the per-pod max policy, department queues, cohorts,
    flavors, the YuniKorn ConfigMap) are only in :func:`render_cluster`.
    """
    objects = [render_namespace_object(plan, ns), *render_resource_quotas(plan, ns)]
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
    objects += render_priority_classes(plan)
    objects += render_per_pod_max_policy(plan)
    objects += render_volcano_queues(plan)
    objects += render_kueue_objects(plan)
    configmap = render_yunikorn_configmap(plan)
    if configmap is not None:
        objects.append(configmap)
    counts = Counter(ObjectKey.of(o) for o in objects)
    duplicates = sorted(k for k, n in counts.items() if n > 1)
    if duplicates:
        raise ValueError(f"plan renders the same object more than once: {duplicates}")
    return _sorted_for_apply(objects)
