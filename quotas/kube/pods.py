"""A pod's amount of each resource, counted the way Kubernetes counts it (component-helpers
``resource.PodRequests`` / ``PodLimits``): one function for what the portal reads of running
pods (quotas.kube.live_usage, the usage rollups and the suggestions built on them) and for what the
per-pod max policy admits (quotas.kube.render emits it as CEL; the tests hold the two to the
same answers).

Per resource: the sidecars (init containers with ``restartPolicy: Always``, running next to
the app containers) + the larger of the app containers' sum and the largest other init
container. (Kubernetes adds to an init container only the sidecars started before it; adding
all of them never counts less, and is what the policy checks.) For cpu and memory, pod-level
``spec.resources`` count too: a pod-level request next to the containers' aggregate (the
larger), a pod-level limit, when the limits are counted, instead of it. Pod ``overhead`` is
not counted (the policy does not count it either).
"""

from collections import defaultdict
from decimal import Decimal

from kubernetes.utils import parse_quantity

# The resources pod-level ``spec.resources`` may state (PodLevelResources).
POD_LEVEL_RESOURCES = frozenset({"cpu", "memory"})


def _quantities(values: dict | None) -> dict[str, Decimal]:
    return {name: Decimal(parse_quantity(value)) for name, value in (values or {}).items()}


def container_amounts(container: dict, *, limits: bool = False) -> dict[str, Decimal]:
    """What one container counts per resource: its requests (an extended resource that states
    only a limit requests the limit, as the API server defaults it), or with ``limits`` what
    it states (the limit if stated, else the request)."""
    resources = container.get("resources") or {}
    requests = _quantities(resources.get("requests"))
    stated = _quantities(resources.get("limits"))
    if limits:
        return {**requests, **stated}
    for name, value in stated.items():
        if "/" in name:
            requests.setdefault(name, value)
    return requests


def is_sidecar(container: dict) -> bool:
    """An init container that keeps running next to the app containers."""
    return container.get("restartPolicy") == "Always"


def pod_amounts(pod: dict, *, limits: bool = False) -> dict[str, Decimal]:
    """The pod's effective amount per resource (requests, or with ``limits`` what it states:
    limits, else requests), aggregated as the module says."""
    spec = pod.get("spec") or {}
    init = spec.get("initContainers") or []
    apps = [container_amounts(c, limits=limits) for c in spec.get("containers") or []]
    sidecars = [container_amounts(c, limits=limits) for c in init if is_sidecar(c)]
    one_shot = [container_amounts(c, limits=limits) for c in init if not is_sidecar(c)]
    names = {name for amounts in (*apps, *sidecars, *one_shot) for name in amounts}
    total: dict[str, Decimal] = defaultdict(Decimal)
    for name in names:
        running = sum((a.get(name, Decimal(0)) for a in apps), Decimal(0))
        largest_init = max((a.get(name, Decimal(0)) for a in one_shot), default=Decimal(0))
        alongside = sum((a.get(name, Decimal(0)) for a in sidecars), Decimal(0))
        total[name] = alongside + max(running, largest_init)
    pod_level = spec.get("resources") or {}
    pod_requests = _quantities(pod_level.get("requests"))
    pod_limits = _quantities(pod_level.get("limits"))
    for name in POD_LEVEL_RESOURCES:
        if limits and name in pod_limits:
            total[name] = pod_limits[name]
            continue
        # A pod-level limit without a request requests the limit (API defaulting).
        request = pod_requests.get(name, None if limits else pod_limits.get(name))
        if request is not None:
            total[name] = max(total.get(name, Decimal(0)), request)
    return dict(total)
