"""Render a :class:`~quotas.kube.plan.ClusterPlan` into the Kubernetes objects it stands for.

Pure functions over the frozen plan dataclasses: no I/O, no Django. Every function returns plain
``dict`` objects (apiVersion, kind, metadata, spec/data ...) ready to be applied, validated with
``kubesandbox.schemas.validate_object`` or dumped as YAML. Same plan in, same objects out, in the
same order (``render_cluster`` sorts them for applying).

Mapping (see shared/PRODUCT.md, "How an allocation maps onto cluster objects"):

- core: ``Namespace`` labels and annotations; ``ResourceQuota`` ``gpu-quota`` with the caps,
  plus ``gpu-quota-other-classes`` (hard 0 on ``requests.`` keys for pods outside the allowed
  priority classes); ``LimitRange`` ``default-requests`` (default cpu/memory requests where
  the quota caps them); ``PriorityClass`` objects.
- per-pod max: one cluster-wide ``ValidatingAdmissionPolicy`` + binding that reads each
  namespace's maxima from its annotations (never a LimitRange: see
  :func:`render_per_pod_max_policy`).
- maximum run time: one cluster-wide ``ValidatingAdmissionPolicy`` + binding that holds pods,
  Jobs and Kueue Workloads of a limited priority class to a deadline within the namespace's
  maximum (:func:`render_max_run_time_policy`).
- Volcano: one cluster-scoped ``Queue`` per team namespace (deserved = guarantee, capability =
  cap) under department queues; the Namespace names its queue in an annotation.
- Kueue (v1beta2): ``ResourceFlavor`` per GPU model plus ``default-flavor``, ``Cohort`` chain
  whose root holds the capacity nobody is guaranteed, ``ClusterQueue`` per team namespace
  (nominalQuota = guarantee, borrowingLimit = cap - guarantee; cpu and memory always covered,
  nominal a share of the pool so a team can reclaim what it lent), LocalQueue ``default``.
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
    DepartmentPlan,
    NamespacePlan,
    PriorityClassPlan,
    ResourcePlan,
    SharedTotals,
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
# The team queue of a Namespace, read by the portal's queue policies (and by Volcano's PodGroup
# mutating webhook where one is deployed); on a pod, the queue of the PodGroup Volcano makes for
# it (volcano-sh/volcano: schedulingv1beta1.QueueNameAnnotationKey).
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
# A pod's PodGroup (set on a Volcano Job's pods): that PodGroup's queue is the pod's.
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_SCHEDULER = "volcano"
# The admission policies (and bindings) that hold Volcano work to its namespace's team queue.
VOLCANO_QUEUE_POLICY_NAME = "quota-portal-volcano-queue"
# The Queue CRD's bounds on spec.weight.
VOLCANO_MAX_WEIGHT = 65535
DEFAULT_FLAVOR = "default-flavor"
# The per-pod max admission policy and its binding (one each per cluster).
PER_POD_MAX_POLICY_NAME = "quota-portal-per-pod-max"
PER_POD_MAX_ANNOTATION_PREFIX = "quota-portal/per-pod-max."
# Marks a namespace whose HAMi containers must state their vGPU memory (see
# render_per_pod_max_policy); one annotation per vGPU memory resource.
VGPU_MEMORY_REQUIRED_ANNOTATION_PREFIX = "quota-portal/vgpu-memory-required."
MAX_RUN_TIME_POLICY_NAME = "quota-portal-max-run-time"
# One Namespace annotation per limited priority class, its value the seconds. The class name
# is the annotation's name part, which allows 63 characters: hence MAX_RUN_TIME_CLASS_LENGTH.
MAX_RUN_TIME_ANNOTATION_PREFIX = "quota-portal/max-run-time."
MAX_RUN_TIME_CLASS_LENGTH = 63 - len(MAX_RUN_TIME_ANNOTATION_PREFIX.split("/", 1)[1])
# The LimitRange that gives containers default cpu/memory requests where the quota caps them.
LIMIT_RANGE_NAME = "default-requests"
# Default requests, in base units (cores, bytes): what a small sidecar (a mesh proxy, a log
# shipper) needs. A namespace gets the smaller of this and its per-pod max (else its cap).
DEFAULT_REQUESTS = {"cpu": Decimal("0.1"), "memory": Decimal(128 * 2**20)}
# Resources a pod may state at pod level (spec.resources, PodLevelResources; hugepages aside).
_POD_LEVEL_RESOURCES = ("cpu", "memory")
# HAMi (Project-HAMi/HAMi, default device config): the device-count resource whose containers
# get a whole device's memory unless they also state the memory resource.
HAMI_COUNT_RESOURCES = {"nvidia.com/gpumem": "nvidia.com/gpu"}

VOLCANO_API = "scheduling.volcano.sh/v1beta1"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
ADMISSION_API = "admissionregistration.k8s.io/v1"

# HAMi vGPU resources are enforced by HAMi's own quota manager, which reads only
# ``limits.<resource>`` keys (limits.nvidia.com/gpumem, limits.nvidia.com/gpucores); everything
# else is quota'd on requests (the only prefix Kubernetes' own quota evaluator tracks for
# extended resources).
_LIMIT_KINDS = frozenset({"vgpu_memory", "vgpu_cores"})
# Kinds that count as accelerators when deriving a Volcano weight.
ACCELERATOR_KINDS = frozenset({"gpu", "mig"})
# Resources every pod requests: a Kueue ClusterQueue that does not cover them never admits it.
_KUEUE_BASE_RESOURCES = ("cpu", "memory")
# "Unbounded" cpu / memory for Kueue, in base units (cores, bytes): far above any cluster, and
# far below int64 (Kueue sums quotas as int64 milli-cpu / bytes up the cohort tree).
_KUEUE_UNBOUNDED = {"cpu": Decimal(10**9), "memory": Decimal(2**60)}
# The steps a ClusterQueue's share of the cpu / memory pool is rounded down to (base units): a
# millicore, a MiB.
_KUEUE_SHARE_STEP = {"cpu": Decimal("0.001"), "memory": Decimal(2**20)}

# Apply order: namespaces, then cluster-scoped objects, then namespaced objects.
_KIND_ORDER = {
    ("v1", "Namespace"): 0,
    ("scheduling.k8s.io/v1", "PriorityClass"): 1,
    (ADMISSION_API, "ValidatingAdmissionPolicy"): 2,
    (ADMISSION_API, "ValidatingAdmissionPolicyBinding"): 3,
    (ADMISSION_API, "MutatingAdmissionPolicy"): 2,
    (ADMISSION_API, "MutatingAdmissionPolicyBinding"): 3,
    (KUEUE_API, "ResourceFlavor"): 4,
    (KUEUE_API, "Cohort"): 5,
    (VOLCANO_API, "Queue"): 6,
    (KUEUE_API, "ClusterQueue"): 7,
    # Same rank as the quota: a namespace's LimitRange ("default-requests") sorts before its
    # quotas, so containers get their default requests before a cpu/memory quota demands them.
    ("v1", "LimitRange"): 8,
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
    return _allocation_totals(ns.allocations for ns in namespaces)


def _allocation_totals(
    members: Iterable[Iterable[AllocationPlan]],
) -> dict[str, tuple[AllocationPlan, Decimal, Decimal]]:
    totals: dict[str, tuple[AllocationPlan, Decimal, Decimal]] = {}
    for allocations in members:
        for a in allocations:
            _, guarantee, cap = totals.get(a.resource.name, (a, Decimal(0), Decimal(0)))
            totals[a.resource.name] = (a, guarantee + a.guarantee, cap + a.cap)
    return dict(sorted(totals.items()))


def _departments(plan: ClusterPlan) -> dict[str, tuple[str | None, list[NamespacePlan]]]:
    """Department slug -> (its parent department or None, all namespaces below it); only for
    a plan of all namespaces (Kueue's and YuniKorn's objects are rendered from those)."""
    departments: dict[str, tuple[str | None, list[NamespacePlan]]] = {}
    for ns in _with_allocations(plan):
        chain = ns.team.ancestors
        for i, dept in enumerate(chain):
            parent = chain[i + 1] if i + 1 < len(chain) else None
            _, members = departments.setdefault(dept, (parent, []))
            members.append(ns)
    return dict(sorted(departments.items()))


def department_plan(
    slug: str, parent: str | None, members: Iterable[tuple[AllocationPlan, ...]]
) -> DepartmentPlan:
    """A department's totals over the allocations of the namespaces below it (one tuple per
    namespace that has allocations)."""
    members = [allocations for allocations in members if allocations]
    return DepartmentPlan(
        slug=slug,
        parent=parent,
        totals=tuple((a.resource, g, c) for a, g, c in _allocation_totals(members).values()),
        weight=min(VOLCANO_MAX_WEIGHT, sum(volcano_weight(m) for m in members)),
    )


def shared_totals(plan: ClusterPlan) -> SharedTotals:
    """The whole cluster's totals the cluster-wide objects are rendered from: those a plan of
    some namespaces carries, else computed from the plan's namespaces (without departments:
    :func:`department_plans`)."""
    if plan.shared is not None:
        return plan.shared
    return SharedTotals(
        any_allocations=any(ns.allocations for ns in plan.namespaces),
        per_pod_max_resources=tuple(
            sorted({name for ns in plan.namespaces for name in _per_pod_maxima(ns)})
        ),
        vgpu_memory_resources=tuple(
            sorted({name for ns in plan.namespaces for name in _vgpu_memory_resources(ns)})
        ),
        any_max_run_time=any(ns.max_run_times for ns in plan.namespaces),
    )


def department_plans(plan: ClusterPlan) -> tuple[DepartmentPlan, ...]:
    """The departments whose parent queues the plan renders, by slug: those above the plan's
    namespaces in a plan of some, every one in a plan of all."""
    if plan.shared is not None:
        return plan.shared.departments
    return tuple(
        department_plan(slug, parent, [ns.allocations for ns in members])
        for slug, (parent, members) in _departments(plan).items()
    )


# --------------------------------------------------------------------------------------------
# core


def per_pod_max_annotation(resource_name: str) -> str:
    """The Namespace annotation that carries the per-pod max of ``resource_name``.

    ``quota-portal/per-pod-max.nvidia.com_gpu``: the name part of an annotation key allows no
    ``/`` and at most 63 characters, so ``/`` becomes ``_`` and a name too long is cut and
    suffixed with a hash of the whole resource name (still one key per resource).
    """
    return _resource_annotation(PER_POD_MAX_ANNOTATION_PREFIX, resource_name)


def vgpu_memory_required_annotation(resource_name: str) -> str:
    """The Namespace annotation that makes HAMi containers of the namespace state
    ``resource_name`` (a vGPU memory resource): ``quota-portal/vgpu-memory-required.<name>``."""
    return _resource_annotation(VGPU_MEMORY_REQUIRED_ANNOTATION_PREFIX, resource_name)


def max_run_time_annotation(priority_class: str) -> str:
    """``quota-portal/max-run-time.<class>``: the namespace's maximum run time of the class,
    in seconds. The admission policy builds the key from the class name, so it is never
    shortened: a class with a maximum run time has at most MAX_RUN_TIME_CLASS_LENGTH
    characters (quotas.services.run_time_limit_check)."""
    if len(priority_class) > MAX_RUN_TIME_CLASS_LENGTH:
        raise ValueError(f"priority class name too long for a maximum run time: {priority_class}")
    return MAX_RUN_TIME_ANNOTATION_PREFIX + priority_class


def _resource_annotation(prefix: str, resource_name: str) -> str:
    name = prefix.split("/", 1)[1] + resource_name.replace("/", "_")
    if len(name) > 63:
        digest = hashlib.sha256(resource_name.encode()).hexdigest()[:10]
        name = name[:52].rstrip("-_.") + "-" + digest
    return prefix.split("/", 1)[0] + "/" + name


def _per_pod_maxima(ns: NamespacePlan) -> dict[str, str]:
    return {
        a.resource.name: _amount(a, a.per_pod_max)
        for a in _sorted_allocations(ns)
        if a.per_pod_max is not None
    }


def _vgpu_memory_resources(ns: NamespacePlan) -> list[str]:
    """The HAMi vGPU memory resources allocated to the namespace whose device-count resource
    is known (:data:`HAMI_COUNT_RESOURCES`)."""
    return [
        a.resource.name
        for a in _sorted_allocations(ns)
        if a.resource.kind == "vgpu_memory" and a.resource.name in HAMI_COUNT_RESOURCES
    ]


def render_namespace_object(plan: ClusterPlan, ns: NamespacePlan) -> dict:
    """The team ``Namespace``: labels, and annotations for the per-pod maxima and the HAMi
    vGPU memory rule (read by the admission policy) and, with Volcano, the queue its PodGroups
    go to.

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
    for name in _vgpu_memory_resources(ns):
        annotations[vgpu_memory_required_annotation(name)] = "true"
    for priority_class, seconds in ns.max_run_times:
        annotations[max_run_time_annotation(priority_class)] = str(seconds)
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


def render_limit_range(plan: ClusterPlan, ns: NamespacePlan) -> dict | None:
    """The ``LimitRange`` ``default-requests`` of a namespace whose quota caps cpu or memory,
    else None.

    Kubernetes' quota admission refuses every container that states no request for a quota'd
    ``requests.cpu`` / ``requests.memory`` ("must specify requests.cpu for: ..."): injected
    sidecars and third-party charts often state none. The LimitRanger admission plugin sets a
    ``type: Container`` ``defaultRequest`` on every container and init container that states no
    request of that resource (after API defaulting, which copies a stated limit into a missing
    request, so a container's own limit is never exceeded). Only the quota'd resources get a
    default; no ``default`` limits (the quota counts requests, a limit would throttle) and never
    GPU entries (a default GPU request would give every container a GPU).

    The default is :data:`DEFAULT_REQUESTS` (100m cpu, 128Mi memory), lowered to the
    namespace's per-pod max (else its cap) when that is smaller, so a defaulted container
    alone always fits both.
    """
    defaults = {}
    for a in _sorted_allocations(ns):
        name = a.resource.name
        if name not in DEFAULT_REQUESTS or _quota_key(a) != f"requests.{name}":
            continue
        bound = _base_units(a.per_pod_max if a.per_pod_max is not None else a.cap, a.resource)
        defaults[name] = _base_quantity(min(DEFAULT_REQUESTS[name], bound), name)
    if not defaults:
        return None
    return kube_object(
        "v1",
        "LimitRange",
        _metadata(plan, LIMIT_RANGE_NAME, namespace=ns.name, team=ns.team.slug),
        spec={"limits": [{"type": "Container", "defaultRequest": defaults}]},
    )


def _cel_amount(resource: str) -> str:
    """CEL: what a container ``c`` states for ``resource``: its limit, else its request, else
    0.0. The larger of the two: the API server has already refused a request above the limit
    (and a request of an extended resource that differs from its limit)."""
    return (
        f"has(c.resources) && has(c.resources.limits) && '{resource}' in c.resources.limits"
        f" ? quantity(c.resources.limits['{resource}']).asApproximateFloat()"
        f" : has(c.resources) && has(c.resources.requests) && '{resource}' in c.resources.requests"
        f" ? quantity(c.resources.requests['{resource}']).asApproximateFloat() : 0.0"
    )


def _cel_states(resource: str) -> str:
    """CEL: whether a container ``c`` states ``resource`` in its limits or requests."""
    return (
        f"has(c.resources) && (has(c.resources.limits) && '{resource}' in c.resources.limits"
        f" || has(c.resources.requests) && '{resource}' in c.resources.requests)"
    )


def _cel_pod_level(field: str, resource: str) -> str:
    """CEL: whether the pod states ``resource`` in pod-level ``spec.resources.<field>``."""
    return (
        f"has(object.spec.resources) && has(object.spec.resources.{field})"
        f" && '{resource}' in object.spec.resources.{field}"
    )


def _deny_binding(plan: ClusterPlan, policy_name: str) -> dict:
    """The binding that puts a ValidatingAdmissionPolicy in force: refusing (Deny), with the
    policy's name."""
    return kube_object(
        ADMISSION_API,
        "ValidatingAdmissionPolicyBinding",
        _metadata(plan, policy_name),
        spec={"policyName": policy_name, "validationActions": ["Deny"]},
    )


def render_per_pod_max_policy(plan: ClusterPlan) -> list[dict]:
    """The ``ValidatingAdmissionPolicy`` and its binding that hold pods to the per-pod max of
    their namespace and HAMi containers to stating their vGPU memory, or nothing when no
    namespace has a per-pod max or a vGPU memory allocation.

    Why not a LimitRange: a ``type: Pod`` max rejects every pod that states no limit for the
    resource (CPU-only pods, injected sidecars, controller pods), and a ``type: Container``
    max defaults every container's limit to the max.

    Design: one policy and one binding for the whole cluster; each namespace's maxima are
    annotations on its Namespace (:func:`per_pod_max_annotation`, a quantity such as "8"),
    read through ``namespaceObject``. That scales to thousands of namespaces (two objects, the
    API server caches namespaces) and has no parameter objects that could be missing: a
    namespace without the annotation, or a pod that states nothing of the resource, is
    admitted. Not a ConfigMap parameter (``paramKind``): a ConfigMap in the team's namespace is
    writable by anyone with the usual ``edit`` role, the cluster-scoped Namespace is not.

    Per resource with a per-pod max anywhere in the cluster, one validation compares what the
    pod states with the max: per container the larger of limit and request (the limit if
    stated, else the request: :func:`_cel_amount`), aggregated the way Kubernetes computes a
    pod's effective requests and limits (component-helpers ``resource.PodRequests`` /
    ``PodLimits``): sidecars (init containers with ``restartPolicy: Always``) + the larger of
    the sum of the regular containers and the largest other init container. (Kubernetes adds
    only the sidecars started before an init container to it; adding all of them never counts
    less.) For cpu and memory, pod-level ``spec.resources`` (PodLevelResources, on by default
    since 1.34) replace the containers' aggregate: a pod-level limit is the pod's amount (its
    containers' limits each fit it, their requests sum to at most the pod's), a pod-level
    request alone counts next to the containers' aggregate. Amounts are
    compared as floats with half the smallest unit as tolerance (1m cpu, 1 for the rest), so
    float sums never reject a pod that is exactly at its max. Only standard CEL and the
    Kubernetes ``quantity()`` and list ``sum()`` functions are used.

    HAMi: a container that states the device count (``nvidia.com/gpu``) but not
    ``nvidia.com/gpumem`` gets a whole device's memory (HAMi's default), which neither the
    zero quota on ``requests.nvidia.com/gpumem`` nor the per-pod max sees. In a namespace with
    a vGPU memory allocation (:func:`vgpu_memory_required_annotation`) such a container,
    init containers included, is refused, naming it; namespaces without one keep whole-GPU
    pods. Refused rather than defaulted: only a MutatingAdmissionPolicy could default it, and a
    default amount would be a guess about the workload.

    Only ``CREATE`` of pods and ``UPDATE`` of ``pods/resize`` (in-place resize) are checked:
    checking every pod update would block label or finalizer changes of pods created before
    a max was lowered. The rules state ``scope`` (the API server would default it): the list is
    replaced as a whole on apply, so a defaulted field in it would be a change every time.
    ``failurePolicy: Fail``: a cap is not bypassed when an expression
    fails (e.g. a hand-edited annotation that is not a quantity); the namespace selector keeps
    the policy to the namespaces this portal cluster manages.
    """
    shared = shared_totals(plan)
    resources = list(shared.per_pod_max_resources)
    vgpu_memory = list(shared.vgpu_memory_resources)
    if not resources and not vgpu_memory:
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
        amount = _cel_amount(resource)
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
                "expression": f"([0.0] + object.spec.containers.map(c, {amount})).sum()",
            },
            {
                "name": f"{v}Sidecars",
                "expression": f"([0.0] + variables.sidecars.map(c, {amount})).sum()",
            },
            {
                "name": f"{v}Running",
                "expression": f"variables.{v}Sidecars + variables.{v}Containers",
            },
        ]
        # sidecars + max(containers, each init container) <= max, written without a max():
        # the running containers fit, and every init container fits next to the sidecars.
        init_fits = (
            f"variables.oneShotInitContainers.all(c, variables.{v}Sidecars + ({amount})"
            f" <= variables.{v}Max)"
        )
        if resource in _POD_LEVEL_RESOURCES:
            pod_limit = f"object.spec.resources.limits['{resource}']"
            pod_request = f"object.spec.resources.requests['{resource}']"
            variables += [
                {"name": f"{v}PodLimitSet", "expression": _cel_pod_level("limits", resource)},
                {
                    "name": f"{v}PodRequest",
                    "expression": f"{_cel_pod_level('requests', resource)}"
                    f" ? quantity({pod_request}).asApproximateFloat() : 0.0",
                },
                {
                    # A pod-level limit is the pod's; else the larger of a pod-level request
                    # and what the containers state.
                    "name": f"{v}Pod",
                    "expression": f"variables.{v}PodLimitSet"
                    f" ? quantity({pod_limit}).asApproximateFloat()"
                    f" : variables.{v}PodRequest > variables.{v}Running"
                    f" ? variables.{v}PodRequest : variables.{v}Running",
                },
            ]
            init_fits = f"(variables.{v}PodLimitSet || {init_fits})"
        else:
            variables.append({"name": f"{v}Pod", "expression": f"variables.{v}Running"})
        fits = f"variables.{v}Pod <= variables.{v}Max && {init_fits}"
        validations.append(
            {
                "expression": f"!variables.{v}HasMax || ({fits})",
                "message": f"the pod's {resource} exceeds the per-pod max of its namespace",
                "messageExpression": f"(variables.{v}Pod <= variables.{v}Max"
                f" ? 'an init container of the pod states more {resource}'"
                f" : 'the pod states ' + string(variables.{v}Pod) + ' {resource}')"
                f" + ' (limits, else requests), above the per-pod max ' + {maximum}"
                " + ' of namespace ' + namespaceObject.metadata.name",
                "reason": "Forbidden",
            }
        )
    if vgpu_memory:
        variables.append(
            {
                "name": "allContainers",
                "expression": "object.spec.containers + variables.initContainers",
            }
        )
    for index, memory in enumerate(vgpu_memory):
        v, count = f"h{index}", HAMI_COUNT_RESOURCES[memory]
        key = vgpu_memory_required_annotation(memory)
        variables += [
            {
                "name": f"{v}Required",
                "expression": "has(namespaceObject.metadata.annotations)"
                f" && '{key}' in namespaceObject.metadata.annotations",
            },
            {
                "name": f"{v}Unsliced",
                "expression": f"variables.allContainers.filter(c, ({_cel_states(count)})"
                f" && !({_cel_states(memory)}))",
            },
        ]
        validations.append(
            {
                "expression": f"!variables.{v}Required || size(variables.{v}Unsliced) == 0",
                "message": f"a container states {count} without {memory}",
                "messageExpression": f"'container ' + variables.{v}Unsliced[0].name"
                f" + ' states {count} without {memory}: in namespace '"
                " + namespaceObject.metadata.name"
                f" + ' HAMi would give it the whole memory of a device, which the quota on"
                f" {memory} does not count; state {memory}'",
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
    binding = _deny_binding(plan, PER_POD_MAX_POLICY_NAME)
    return [policy, binding]


def render_max_run_time_policy(plan: ClusterPlan) -> list[dict]:
    """The ``ValidatingAdmissionPolicy`` and binding that hold what runs under a priority class
    with a maximum run time (:func:`max_run_time_annotation` on its Namespace) to a deadline
    within it, or nothing when no namespace of the cluster has one.

    What ends a run, and what the policy therefore requires of each kind:

    - a Job (batch/v1): ``spec.activeDeadlineSeconds``. The job controller counts it from the
      Job's start (reset while the Job is suspended, so a Job Kueue holds back does not use up
      its time waiting), then deletes its pods and marks it failed (``DeadlineExceeded``); the
      quota's used GPUs go back down. The class is the pod template's ``priorityClassName``.
    - a pod: ``spec.activeDeadlineSeconds``, which the kubelet enforces (the pod fails with
      ``DeadlineExceeded``). A pod whose controller is a Job is held through its Job instead:
      the Job's deadline covers its pods, and requiring one per pod as well would make every
      retry start a new clock.
    - a Kueue Workload made directly (no controller owner; one Kueue makes for a Job is held
      through the Job): ``spec.maximumExecutionTimeSeconds``. Kueue counts it from admission
      and, when it passes, deactivates the Workload and releases its quota. The class is
      ``spec.priorityClassRef`` when it names a Kubernetes PriorityClass.

    A deadline must be stated, and at most the maximum. On UPDATE (Jobs and Workloads: the
    deadline is mutable) only a change of it is checked, so the controllers' own updates of
    objects made before a maximum was set or lowered still pass. Pods are checked on CREATE
    (their deadline can only be lowered afterwards). ``failurePolicy: Fail``: a hand-edited
    annotation that is no number denies instead of letting runs go unbounded.
    """
    if not shared_totals(plan).any_max_run_time:
        return []
    annotations = "namespaceObject.metadata.annotations"
    deadline_of = (
        "variables.isWorkload"
        " ? (has({o}.spec.maximumExecutionTimeSeconds) ? {o}.spec.maximumExecutionTimeSeconds : 0)"
        " : (has({o}.spec.activeDeadlineSeconds) ? {o}.spec.activeDeadlineSeconds : 0)"
    )
    variables = [
        {"name": "isWorkload", "expression": "request.resource.group == 'kueue.x-k8s.io'"},
        {"name": "isJob", "expression": "request.resource.group == 'batch'"},
        {
            "name": "className",
            "expression": "variables.isJob"
            " ? (has(object.spec.template.spec.priorityClassName)"
            " ? object.spec.template.spec.priorityClassName : '')"
            " : variables.isWorkload"
            " ? (has(object.spec.priorityClassRef)"
            " && object.spec.priorityClassRef.group == 'scheduling.k8s.io'"
            " ? object.spec.priorityClassRef.name : '')"
            " : (has(object.spec.priorityClassName) ? object.spec.priorityClassName : '')",
        },
        {
            "name": "key",
            "expression": f"'{MAX_RUN_TIME_ANNOTATION_PREFIX}' + variables.className",
        },
        {
            "name": "limited",
            "expression": f"variables.className != '' && has({annotations})"
            f" && variables.key in {annotations}",
        },
        {
            "name": "maxSeconds",
            "expression": f"variables.limited ? int({annotations}[variables.key]) : 0",
        },
        {
            # Held through its controller: a Job's pods, a Workload Kueue made for an owner.
            "name": "heldByOwner",
            "expression": "!variables.isJob && has(object.metadata.ownerReferences)"
            " && object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller"
            " && (variables.isWorkload || (r.apiVersion == 'batch/v1' && r.kind == 'Job')))",
        },
        {"name": "deadline", "expression": deadline_of.format(o="object")},
        {
            "name": "oldDeadline",
            "expression": "request.operation == 'UPDATE' ? ("
            + deadline_of.format(o="oldObject")
            + ") : -1",
        },
        {
            "name": "field",
            "expression": "variables.isWorkload ? 'spec.maximumExecutionTimeSeconds'"
            " : 'spec.activeDeadlineSeconds'",
        },
    ]
    fits = "variables.deadline > 0 && variables.deadline <= variables.maxSeconds"
    validation = {
        "expression": f"!variables.limited || variables.heldByOwner || ({fits})"
        " || variables.deadline == variables.oldDeadline",
        "message": "runs of this priority class must state a deadline within the maximum run"
        " time of the namespace",
        "messageExpression": "request.kind.kind + ' ' + object.metadata.name"
        " + ' of priority class ' + variables.className + ' in namespace '"
        " + namespaceObject.metadata.name + ' must state ' + variables.field"
        " + ' of at most ' + string(variables.maxSeconds)"
        " + ' (the maximum run time of the class there); it states '"
        " + (variables.deadline > 0 ? string(variables.deadline) : 'none')",
        "reason": "Forbidden",
    }
    rules = [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["pods"],
            "scope": "Namespaced",
        },
        {
            "apiGroups": ["batch"],
            "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["jobs"],
            "scope": "Namespaced",
        },
    ]
    if "kueue" in plan.backends:
        rules.append(
            {
                "apiGroups": ["kueue.x-k8s.io"],
                "apiVersions": [KUEUE_API.split("/")[1]],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["workloads"],
                "scope": "Namespaced",
            }
        )
    policy = kube_object(
        ADMISSION_API,
        "ValidatingAdmissionPolicy",
        _metadata(plan, MAX_RUN_TIME_POLICY_NAME),
        spec={
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": {
                    "matchLabels": {MANAGED_BY_LABEL: plan.managed_by, CLUSTER_LABEL: plan.name}
                },
                "resourceRules": rules,
            },
            "variables": variables,
            "validations": [validation],
        },
    )
    binding = _deny_binding(plan, MAX_RUN_TIME_POLICY_NAME)
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
        (a.guarantee for a in allocations if a.resource.kind in ACCELERATOR_KINDS), Decimal(0)
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
    queue carries the deserved and capability sums of the namespaces below it, because Volcano's
    queue webhook rejects a child whose capability exceeds an ancestor's, or children whose
    deserved sum exceeds the parent's. It carries no guarantee: the proportion plugin subtracts
    the guarantee of every queue, parents included, from what the others may use, so a parent
    repeating its members' sum would count it once per level; the webhook holds the children's
    guarantee sum to a parent's capability when the parent states none.
    """
    if "volcano" not in plan.backends:
        return []
    namespaces = _with_allocations(plan)
    names = {ns.name for ns in namespaces}
    objects = []
    for dept in department_plans(plan):
        if dept.slug in names:
            raise ValueError(
                f"department {dept.slug!r} and a team namespace share a Volcano queue name"
            )
        objects.append(
            _volcano_queue(
                plan,
                dept.slug,
                dept.slug,
                dept.parent,
                deserved={r.name: quantity(g, r.quantity_suffix) for r, g, _ in dept.totals},
                capability={r.name: quantity(c, r.quantity_suffix) for r, _, c in dept.totals},
                guarantee={},
                weight=dept.weight,
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


def _volcano_queue_rules(operations: list[str]) -> list[dict]:
    """The writes that decide a Volcano queue: Volcano Jobs and PodGroups (``spec.queue``) and
    pods (their queue annotation, read when Volcano makes a PodGroup for a bare pod)."""
    rule = {"operations": operations, "scope": "Namespaced"}
    return [
        {
            **rule,
            "apiGroups": ["batch.volcano.sh"],
            "apiVersions": ["v1alpha1"],
            "resources": ["jobs"],
        },
        {
            **rule,
            "apiGroups": ["scheduling.volcano.sh"],
            "apiVersions": ["v1beta1"],
            "resources": ["podgroups"],
        },
        {
            **rule,
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["pods"],
        },
    ]


def _volcano_queue_variables() -> list[dict]:
    key = VOLCANO_QUEUE_ANNOTATION
    return [
        {
            # The namespace's team queue; "" where the namespace has none (no allocation).
            "name": "expected",
            "expression": "has(namespaceObject.metadata.annotations)"
            f" && '{key}' in namespaceObject.metadata.annotations"
            f" ? namespaceObject.metadata.annotations['{key}'] : ''",
        },
        {"name": "isPod", "expression": "request.kind.kind == 'Pod'"},
        {
            # A pod decides its queue only when Volcano makes a PodGroup for it: it is for
            # Volcano and names no PodGroup (a Volcano Job's pods name the Job's).
            "name": "podDecides",
            "expression": "variables.isPod && has(object.spec.schedulerName)"
            f" && object.spec.schedulerName == '{VOLCANO_SCHEDULER}'"
            " && !(has(object.metadata.annotations)"
            f" && '{VOLCANO_GROUP_ANNOTATION}' in object.metadata.annotations"
            f" && object.metadata.annotations['{VOLCANO_GROUP_ANNOTATION}'] != '')",
        },
        {
            "name": "queue",
            "expression": "variables.isPod"
            f" ? (has(object.metadata.annotations) && '{key}' in object.metadata.annotations"
            f" ? object.metadata.annotations['{key}'] : '')"
            " : (has(object.spec.queue) ? object.spec.queue : '')",
        },
        {
            "name": "decides",
            "expression": "variables.expected != '' && (variables.isPod ? variables.podDecides"
            " : true)",
        },
    ]


def render_volcano_queue_policy(plan: ClusterPlan) -> list[dict]:
    """The admission policies that hold the Volcano work of every managed namespace to the
    namespace's team queue; nothing without Volcano or without a team queue.

    Volcano routes by what each object says: a Volcano Job's ``spec.queue`` (its mutating
    webhook sets ``default`` when empty) is copied into the Job's PodGroup; the PodGroup
    controller gives a bare pod for Volcano a PodGroup whose queue is the pod's
    ``scheduling.volcano.sh/queue-name`` annotation; the scheduler puts a PodGroup without a
    queue into ``default``. The Namespace annotation is read only by the PodGroup mutating
    webhook, which default installs (v1.12+) no longer deploy. So:

    - a ``ValidatingAdmissionPolicy`` refuses, in namespaces that have a team queue (the
      Namespace annotation, read through ``namespaceObject``), a Job or PodGroup whose queue
      is another, and a bare Volcano pod whose annotation names another (or none). Volcano's
      own controllers pass: they copy the queue of the Job or pod that passed. On UPDATE only a
      change of the queue is checked, so objects older than the policy can still be updated;
    - a ``MutatingAdmissionPolicy`` (v1, served from Kubernetes 1.36:
      ``plan.mutating_policies_served``) sets the team queue where a Job or PodGroup is created
      with none or ``default``, and on a bare Volcano pod without the annotation. It runs
      before Volcano's webhooks, and its ``failurePolicy`` is ``Ignore``: the validating
      policy still refuses what a failed mutation left. Without it, a Job or pod that names no
      queue is refused with a message naming the queue to use.
    """
    if "volcano" not in plan.backends or not shared_totals(plan).any_allocations:
        return []
    namespace_selector = {
        "matchLabels": {MANAGED_BY_LABEL: plan.managed_by, CLUSTER_LABEL: plan.name}
    }
    # The queue an update started from (a variable: the type check against Pod would warn of
    # a field pods do not have in a validation).
    old_queue = {
        "name": "oldQueue",
        "expression": "request.operation == 'UPDATE' && !variables.isPod"
        " && has(oldObject.spec.queue) ? oldObject.spec.queue : ''",
    }
    policy = kube_object(
        ADMISSION_API,
        "ValidatingAdmissionPolicy",
        _metadata(plan, VOLCANO_QUEUE_POLICY_NAME),
        spec={
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": namespace_selector,
                "resourceRules": _volcano_queue_rules(["CREATE", "UPDATE"]),
            },
            "variables": [*_volcano_queue_variables(), old_queue],
            "validations": [
                {
                    "expression": "!variables.decides || variables.queue == variables.expected"
                    " || (request.operation == 'UPDATE' && variables.oldQueue == variables.queue)",
                    "message": "the Volcano queue is not the Volcano queue of the namespace",
                    "messageExpression": '"queue \'" + variables.queue + "\' is not the Volcano'
                    ' queue of namespace " + namespaceObject.metadata.name + ": its work runs'
                    " in queue '\" + variables.expected + \"' (spec.queue of Volcano Jobs and"
                    f' PodGroups, annotation {VOLCANO_QUEUE_ANNOTATION} of pods)"',
                    "reason": "Forbidden",
                }
            ],
        },
    )
    binding = _deny_binding(plan, VOLCANO_QUEUE_POLICY_NAME)
    objects = [policy, binding]
    if not plan.mutating_policies_served:
        return objects
    # JSON pointer escaping of the key (RFC 6901), done here rather than in CEL.
    jsonpatch_key = VOLCANO_QUEUE_ANNOTATION.replace("~", "~0").replace("/", "~1")
    unset = "variables.decides && (variables.queue == '' || variables.queue == 'default')"
    mutating = kube_object(
        ADMISSION_API,
        "MutatingAdmissionPolicy",
        _metadata(plan, VOLCANO_QUEUE_POLICY_NAME),
        spec={
            "failurePolicy": "Ignore",
            "matchConstraints": {
                "namespaceSelector": namespace_selector,
                "resourceRules": _volcano_queue_rules(["CREATE"]),
            },
            "variables": _volcano_queue_variables(),
            "mutations": [
                {
                    "patchType": "JSONPatch",
                    "jsonPatch": {
                        "expression": f"{unset} && !variables.isPod"
                        " ? [JSONPatch{op: 'add', path: '/spec/queue',"
                        " value: variables.expected}] : []"
                    },
                },
                {
                    "patchType": "JSONPatch",
                    "jsonPatch": {
                        "expression": f"!({unset} && variables.isPod) ? []"
                        " : has(object.metadata.annotations)"
                        " ? [JSONPatch{op: 'add',"
                        f" path: '/metadata/annotations/{jsonpatch_key}',"
                        " value: variables.expected}]"
                        " : [JSONPatch{op: 'add', path: '/metadata/annotations',"
                        f" value: {{'{VOLCANO_QUEUE_ANNOTATION}': variables.expected}}}}]"
                    },
                },
            ],
            # Again after a later webhook or policy changed the object, so a queue of
            # "default" set after this policy ran is corrected too.
            "reinvocationPolicy": "IfNeeded",
        },
    )
    mutating_binding = kube_object(
        ADMISSION_API,
        "MutatingAdmissionPolicyBinding",
        _metadata(plan, VOLCANO_QUEUE_POLICY_NAME),
        spec={"policyName": VOLCANO_QUEUE_POLICY_NAME},
    )
    return [*objects, mutating, mutating_binding]


def _whole_plan_needed(plan: ClusterPlan, what: str) -> None:
    # Rendered from every namespace's guarantees (shares of the pools, the queue file):
    # a plan of some namespaces would render them wrong.
    if plan.shared is not None:
        raise ValueError(f"{what} are rendered from a plan of every namespace of the cluster")


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
    if resource_name == "memory" and amount:
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


def _guarantee_shares(plan: ClusterPlan) -> dict[str, Decimal]:
    """Per namespace: the share of the cluster's accelerators it is guaranteed, 0 to 1.

    Its largest guarantee of any resource other than cpu / memory relative to that resource's
    capacity (the sum of all its guarantees where no capacity is recorded or they exceed it).
    Shares summing past 1 (teams guaranteed different resources) are scaled down to sum to 1.
    """
    capacities = {resource.name: amount for resource, amount in plan.capacities}
    namespaces = _with_allocations(plan)
    totals = _resource_totals(namespaces)
    shares: dict[str, Decimal] = {}
    for ns in namespaces:
        share = Decimal(0)
        for a in ns.allocations:
            if a.resource.name in _KUEUE_BASE_RESOURCES or a.guarantee <= 0:
                continue
            whole = max(capacities.get(a.resource.name, Decimal(0)), totals[a.resource.name][1])
            share = max(share, a.guarantee / whole)
        shares[ns.name] = share
    total = sum(shares.values(), Decimal(0))
    if total > 1:
        shares = {name: share / total for name, share in shares.items()}
    return shares


def _kueue_base_quotas(plan: ClusterPlan) -> dict[str, dict[str, Decimal]]:
    """nominalQuota of ``cpu`` / ``memory`` (base units) of every ClusterQueue that has no
    allocation of them: the cluster's pool (unbounded where unknown) less the cpu / memory
    guarantees, shared in proportion to the namespaces' :func:`_guarantee_shares`.

    Why a share and not 0: Kueue reclaims lent quota for a workload only when all of its
    requests fit the ClusterQueue's own nominal quota (``QuantitiesFitInQuota`` in
    pkg/cache/scheduler/resource_node.go, the "hierarchical advantage" of
    pkg/scheduler/preemption/classical); otherwise the borrowers' workloads are candidates only
    for a preemptor that needs no borrowing at all. Every pod requests cpu and memory, so with a
    cpu nominal of 0 a team could never take back the GPUs it lent.
    """
    capacities = {resource.name: (resource, amount) for resource, amount in plan.capacities}
    namespaces = _with_allocations(plan)
    shares = _guarantee_shares(plan)
    quotas: dict[str, dict[str, Decimal]] = {ns.name: {} for ns in namespaces}
    for name in _KUEUE_BASE_RESOURCES:
        total = _kueue_total(plan, name, capacities)
        if total is None:
            total = _KUEUE_UNBOUNDED[name]
        guaranteed = sum(
            (
                _base_units(a.guarantee, a.resource)
                for ns in namespaces
                for a in ns.allocations
                if a.resource.name == name
            ),
            Decimal(0),
        )
        left = max(Decimal(0), total - guaranteed)
        step = _KUEUE_SHARE_STEP[name]
        for ns in namespaces:
            if any(a.resource.name == name for a in ns.allocations):
                continue
            quotas[ns.name][name] = math.floor(left * shares[ns.name] / step) * step
    return quotas


def render_cluster_queue(
    plan: ClusterPlan,
    ns: NamespacePlan,
    *,
    base_quotas: dict[str, dict[str, Decimal]] | None = None,
) -> dict:
    """The Kueue ``ClusterQueue`` of one team namespace (named after it).

    nominalQuota = guarantee, borrowingLimit = cap - guarantee (always stated, 0 included: no
    borrowingLimit means unlimited borrowing). Inference namespaces also get lendingLimit 0,
    Kueue's way of never lending the guarantee. ``reclaimWithinCohort: Any`` lets a team take
    its nominal quota back from borrowers (the guarantee is a floor); ``borrowWithinCohort:
    LowerPriority`` lets a workload that must borrow (say cpu beyond the team's share) still
    preempt lower-priority workloads of queues over their nominal quota; ``withinClusterQueue:
    LowerPriority`` lets its own priority classes preempt each other.

    ``cpu`` and ``memory`` are always covered (``default-flavor``): Kueue leaves a workload
    pending for good when it requests a resource its ClusterQueue does not cover, and every
    real pod requests both. Without an allocation of them the namespace's nominalQuota is its
    share of the cluster's pool (:func:`_kueue_base_quotas`, which ``base_quotas`` caches for
    a whole cluster) and it has no borrowingLimit: beyond it, it borrows from the pool.
    """
    if base_quotas is None:
        base_quotas = _kueue_base_quotas(plan)
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
    for name, amount in base_quotas.get(ns.name, {}).items():
        by_flavor.setdefault(DEFAULT_FLAVOR, {})[name] = {
            "name": name,
            "nominalQuota": _base_quantity(amount, name),
        }
    return kube_object(
        KUEUE_API,
        "ClusterQueue",
        _metadata(plan, ns.name, team=ns.team.slug),
        spec={
            "cohortName": _cohort_of(plan, ns),
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns.name}},
            "preemption": {
                "borrowWithinCohort": {"policy": "LowerPriority"},
                "reclaimWithinCohort": "Any",
                "withinClusterQueue": "LowerPriority",
            },
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


def render_root_cohort(
    plan: ClusterPlan, *, base_quotas: dict[str, dict[str, Decimal]] | None = None
) -> dict:
    """The root ``Cohort``: its own ``resourceGroups`` hold what nobody is guaranteed.

    Kueue lends a ClusterQueue only the unused nominal quota of its cohort tree: the sum of the
    ClusterQueues' nominal quotas (their guarantees) plus the Cohorts' own. Capacity nobody is
    guaranteed must therefore sit in the root Cohort, or no queue can ever borrow it (14 MIG
    slices of which 6 are guaranteed would admit only 6). Per resource any ClusterQueue covers:
    capacity - sum of all guarantees (never below 0; 0 when the capacity is not recorded), so
    the whole tree holds exactly the capacity. Guarantees with lendingLimit 0 stay in their
    ClusterQueue, but they are part of the capacity too, so they are subtracted as well.
    cpu / memory: the pool (unbounded where unknown) less the guarantees and less the shares
    the ClusterQueues hold as nominal quota (:func:`_kueue_base_quotas`; ``base_quotas``
    caches it), so the sum of all nominal quotas stays within the pool.
    A root Cohort has no parent, so it states no borrowingLimit or lendingLimit (Kueue refuses
    them there). Department Cohorts carry no quota of their own: the caps are per namespace
    (each ClusterQueue's borrowingLimit), and a Cohort without limits passes the root's pool
    through to the queues below it.
    """
    if base_quotas is None:
        base_quotas = _kueue_base_quotas(plan)
    capacities = {resource.name: (resource, amount) for resource, amount in plan.capacities}
    resources: dict[str, ResourcePlan] = {}
    guaranteed: dict[str, Decimal] = {}
    for ns in _with_allocations(plan):
        for a in ns.allocations:
            resources.setdefault(a.resource.name, a.resource)
            guaranteed[a.resource.name] = guaranteed.get(a.resource.name, Decimal(0)) + (
                _base_units(a.guarantee, a.resource)
            )
    for shares in base_quotas.values():
        for name, amount in shares.items():
            guaranteed[name] = guaranteed.get(name, Decimal(0)) + amount
    for name in _KUEUE_BASE_RESOURCES:
        resources.setdefault(name, ResourcePlan(name=name, kind=name))
    by_flavor: dict[str, dict[str, dict]] = {}
    for name, resource in sorted(resources.items()):
        # Unknown cpu / memory: unbounded (the portal then gates only what it allocates, the
        # node scheduler still places pods). Unknown GPU capacity: no shared pool.
        total = _kueue_total(plan, name, capacities)
        if total is None:
            total = _KUEUE_UNBOUNDED.get(name, Decimal(0))
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
    _whole_plan_needed(plan, "Kueue's queues")
    namespaces = _with_allocations(plan)
    if not namespaces:
        return []
    objects: list[dict] = []
    base_quotas = _kueue_base_quotas(plan)
    root = render_root_cohort(plan, base_quotas=base_quotas)
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
        objects.append(render_cluster_queue(plan, ns, base_quotas=base_quotas))
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
    _whole_plan_needed(plan, "YuniKorn's queues.yaml")
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
    quotas, its default-requests LimitRange (with a cpu/memory quota) and, per backend, its
    Volcano Queue or Kueue ClusterQueue + LocalQueue.

    Shared objects (PriorityClasses, the per-pod max policy, department queues, cohorts,
    flavors, the YuniKorn ConfigMap) are only in :func:`render_cluster`.
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
    objects += render_per_pod_max_policy(plan)
    objects += render_max_run_time_policy(plan)
    objects += render_volcano_queues(plan)
    objects += render_volcano_queue_policy(plan)
    objects += render_kueue_objects(plan)
    configmap = render_yunikorn_configmap(plan)
    if configmap is not None:
        objects.append(configmap)
    counts = Counter(ObjectKey.of(o) for o in objects)
    duplicates = sorted(k for k, n in counts.items() if n > 1)
    if duplicates:
        raise ValueError(f"plan renders the same object more than once: {duplicates}")
    return _sorted_for_apply(objects)
