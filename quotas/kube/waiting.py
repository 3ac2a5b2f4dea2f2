"""Why a namespace's work waits: the pods, Jobs, Kueue Workloads and Volcano PodGroups that do
not run yet, each with the reason the cluster gives, sorted into the reasons a lead acts on.

Where each reason comes from (what the cluster's own components write):

- **The namespace quota is used up** / **the priority class is not allowed**: the quota
  admission refuses the pod, so no pod exists; its controller (a Job, a ReplicaSet) keeps a
  ``FailedCreate`` warning event "exceeded quota: <quota>, requested: ..., used: ...,
  limited: ...". The quota's name tells the two apart: ``gpu-quota`` holds the caps,
  ``gpu-quota-other-classes`` gives every class the allocation does not allow zero
  (quotas.kube.render.render_resource_quotas). For a used-up quota, the running pods that hold
  most of the resource are named ("and by what").
- **Refused by a policy of the namespace** (the per-pod max, the maximum run time): a
  ``FailedCreate`` event whose message is the admission policy's.
- **No node fits**: the default scheduler (or Volcano) sets the pod's ``PodScheduled``
  condition to False, reason ``Unschedulable``, with the per-node tally in its message.
- **The queue is at its cap** / **the cohort has nothing to lend**: Kueue keeps a Workload's
  ``QuotaReserved`` condition False with its flavor assigner's message: "insufficient quota
  for R in flavor F, ... > maximum capacity (...)" when the request can never fit the
  ClusterQueue, "insufficient unused quota for R in flavor F, N more needed" when it waits.
  Whether waiting means the queue's cap (its usage plus the request above nominalQuota +
  borrowingLimit) or a cohort with nothing left to lend is read off the ClusterQueue's spec
  and status. Volcano's capacity plugin records "queue resource quota insufficient" on a
  PodGroup whose queue is at its capability.
- **Another team is reclaiming its guarantee**: Kueue evicted the Workload (``Evicted``,
  reason ``Preempted``) and its ``Preempted`` condition's reason is ``InCohortReclamation``
  or ``InCohortReclaimWhileBorrowing``: a queue took back the guarantee this one borrowed.
  ``InClusterQueue`` is a run of higher priority in the namespace's own queue.

Anything else that waits is listed with the cluster's own words (reason ``other``). Pods
that Kueue gates or that belong to a listed PodGroup are explained through their Workload or
PodGroup, not twice. Pure: the objects in, the waits out (``read_namespace_waits`` reads them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from kubernetes.utils import parse_quantity

from common.amounts import format_amount
from quotas.kube.pods import pod_amounts
from quotas.kube.render import OTHER_CLASSES_QUOTA_NAME

QUOTA_USED_UP = "quota_used_up"
PRIORITY_CLASS_NOT_ALLOWED = "priority_class_not_allowed"
REFUSED_BY_POLICY = "refused_by_policy"
NO_NODE_FITS = "no_node_fits"
QUEUE_AT_CAP = "queue_at_cap"
NOTHING_TO_LEND = "nothing_to_lend"
RECLAIMED = "reclaimed"
PREEMPTED_BY_PRIORITY = "preempted_by_priority"
OTHER = "other"
REASONS = (
    QUOTA_USED_UP,
    PRIORITY_CLASS_NOT_ALLOWED,
    REFUSED_BY_POLICY,
    NO_NODE_FITS,
    QUEUE_AT_CAP,
    NOTHING_TO_LEND,
    RECLAIMED,
    PREEMPTED_BY_PRIORITY,
    OTHER,
)

# A controller's FailedCreate event counts while the controller still lacks pods and the event
# was seen within this window (controllers retry with a growing back-off, and repeat the event).
EVENT_WINDOW = timedelta(hours=1)
# The holders named for a used-up quota, largest first.
HOLDERS_SHOWN = 5
DETAIL_LENGTH = 500
KUEUE_GATE = "kueue.x-k8s.io/admission"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
RECLAIM_REASONS = frozenset({"InCohortReclamation", "InCohortReclaimWhileBorrowing"})

_EXCEEDED_QUOTA = re.compile(r"exceeded quota: (?P<quota>[-a-z0-9.]+), requested: (?P<req>[^,]+)")
_POLICY_DENIED = re.compile(r"ValidatingAdmissionPolicy '(?P<policy>[^']+)'.*denied request: ")
_IN_FLAVOR = r" for (?P<resource>\S+) in flavor (?P<flavor>[^,]+),"
_UNUSED = re.compile("insufficient unused quota" + _IN_FLAVOR)
_MAX_CAPACITY = re.compile("insufficient quota" + _IN_FLAVOR)


@dataclass(frozen=True)
class Holder:
    """A running pod of the namespace and how much of the resource it holds."""

    pod: str
    amount: str


@dataclass(frozen=True)
class Wait:
    """One thing that waits. ``resource`` is the resource it waits for where the cluster names
    one; ``detail`` the cluster's own message, cut to DETAIL_LENGTH; ``since`` when the
    waiting was first seen (RFC 3339, from the cluster), if it says."""

    kind: str
    name: str
    reason: str
    detail: str
    since: str = ""
    resource: str = ""
    queue: str = ""
    holders: tuple[Holder, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "name": self.name,
            "reason": self.reason,
            "resource": self.resource,
            "queue": self.queue,
            "since": self.since or None,
            "detail": self.detail,
            "holders": [{"pod": h.pod, "amount": h.amount} for h in self.holders],
        }


@dataclass
class NamespaceObjects:
    """What the cluster holds of one namespace (lists as the API returns their items)."""

    pods: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    jobs: list[dict] = field(default_factory=list)
    replica_sets: list[dict] = field(default_factory=list)
    workloads: list[dict] = field(default_factory=list)
    pod_groups: list[dict] = field(default_factory=list)
    resource_quotas: list[dict] = field(default_factory=list)
    # The Kueue ClusterQueues by name (the namespace's own, for a waiting Workload).
    cluster_queues: dict[str, dict] = field(default_factory=dict)
    # Workload name -> ClusterQueue name (from the LocalQueues the Workloads name).
    local_queues: dict[str, str] = field(default_factory=dict)


def _cut(text: str) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= DETAIL_LENGTH else text[: DETAIL_LENGTH - 1] + "…"


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _event_time(event: dict) -> datetime | None:
    series = event.get("series") or {}
    return (
        _parse_time(series.get("lastObservedTime"))
        or _parse_time(event.get("lastTimestamp"))
        or _parse_time(event.get("eventTime"))
        or _parse_time((event.get("metadata") or {}).get("creationTimestamp"))
    )


def _condition(obj: dict, kind: str) -> dict | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return condition
    return None


def _is_true(obj: dict, kind: str) -> bool:
    condition = _condition(obj, kind)
    return bool(condition) and condition.get("status") == "True"


def _name(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("name", "")


def _holders(pods: Iterable[dict], resource: str) -> tuple[Holder, ...]:
    held = []
    for pod in pods:
        if (pod.get("status") or {}).get("phase") != "Running":
            continue
        amount = pod_amounts(pod).get(resource, Decimal(0))
        if amount > 0:
            held.append((amount, _name(pod)))
    held.sort(key=lambda item: (-item[0], item[1]))
    return tuple(Holder(pod=name, amount=format_amount(a)) for a, name in held[:HOLDERS_SHOWN])


def _quota_resource(requested: str) -> str:
    """``requests.nvidia.com/gpu=2`` -> ``nvidia.com/gpu`` (the first resource named)."""
    key = requested.split("=", 1)[0].strip()
    for prefix in ("requests.", "limits."):
        if key.startswith(prefix):
            return key[len(prefix) :]
    return key


def _controller_lacks_pods(kind: str, obj: dict) -> bool:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    if kind == "Job":
        if spec.get("suspend") or _is_true(obj, "Complete") or _is_true(obj, "Failed"):
            return False
        wanted = spec.get("parallelism", 1)
        if spec.get("completions") is not None:
            wanted = min(wanted, spec["completions"] - status.get("succeeded", 0))
        return status.get("active", 0) < wanted
    if kind == "ReplicaSet":
        return status.get("replicas", 0) < spec.get("replicas", 1)
    return True


def _class_refused(quotas: list[dict], priority_class: str, resource: str) -> bool:
    """Whether a quota of the namespace gives the class zero of the resource: an "other
    classes" quota whose scope (PriorityClass NotIn the allowed ones) takes the class in. The
    quota admission names the first quota a pod exceeds, so a used-up ``gpu-quota`` hides
    that the class would be refused anyway; this says so."""
    for quota in quotas:
        spec = quota.get("spec") or {}
        if not (quota.get("metadata") or {}).get("name", "").startswith(OTHER_CLASSES_QUOTA_NAME):
            continue
        if str((spec.get("hard") or {}).get(f"requests.{resource}", "")) != "0":
            continue
        for expression in (spec.get("scopeSelector") or {}).get("matchExpressions") or []:
            if (
                expression.get("scopeName") == "PriorityClass"
                and expression.get("operator") == "NotIn"
                and priority_class not in (expression.get("values") or [])
            ):
                return True
    return False


def _failed_creates(objects: NamespaceObjects, now: datetime) -> list[Wait]:
    controllers = {("Job", _name(j)): j for j in objects.jobs}
    controllers |= {("ReplicaSet", _name(r)): r for r in objects.replica_sets}
    latest: dict[tuple[str, str], tuple[datetime, dict]] = {}
    for event in objects.events:
        if event.get("reason") != "FailedCreate" or event.get("type") != "Warning":
            continue
        involved = event.get("involvedObject") or {}
        key = (involved.get("kind", ""), involved.get("name", ""))
        seen = _event_time(event)
        if key not in controllers or seen is None or now - seen > EVENT_WINDOW:
            continue
        if key not in latest or seen > latest[key][0]:
            latest[key] = (seen, event)
    waits = []
    for key, (_seen, event) in sorted(latest.items()):
        if not _controller_lacks_pods(key[0], controllers[key]):
            continue
        message = event.get("message", "")
        first = _parse_time(event.get("firstTimestamp")) or _parse_time(
            (event.get("metadata") or {}).get("creationTimestamp")
        )
        since = first.isoformat() if first else ""
        if found := _EXCEEDED_QUOTA.search(message):
            resource = _quota_resource(found["req"])
            template = ((controllers[key].get("spec") or {}).get("template") or {}).get("spec")
            priority_class = (template or {}).get("priorityClassName", "")
            if found["quota"].startswith(OTHER_CLASSES_QUOTA_NAME) or _class_refused(
                objects.resource_quotas, priority_class, resource
            ):
                waits.append(
                    Wait(key[0], key[1], PRIORITY_CLASS_NOT_ALLOWED, _cut(message), since, resource)
                )
            else:
                waits.append(
                    Wait(
                        key[0],
                        key[1],
                        QUOTA_USED_UP,
                        _cut(message),
                        since,
                        resource,
                        holders=_holders(objects.pods, resource),
                    )
                )
        elif _POLICY_DENIED.search(message):
            waits.append(Wait(key[0], key[1], REFUSED_BY_POLICY, _cut(message), since))
        else:
            waits.append(Wait(key[0], key[1], OTHER, _cut(message), since))
    return waits


def _workload_request(workload: dict, resource: str) -> Decimal:
    total = Decimal(0)
    for pod_set in (workload.get("spec") or {}).get("podSets") or []:
        template = pod_set.get("template") or {}
        amount = pod_amounts({"spec": template.get("spec") or {}}).get(resource, Decimal(0))
        total += amount * pod_set.get("count", 1)
    return total


def _queue_room(queue: dict, flavor: str, resource: str) -> tuple[Decimal, Decimal | None]:
    """(used, ceiling) of a ClusterQueue for one flavor and resource: the ceiling is
    nominalQuota + borrowingLimit, None where it may borrow without limit."""
    used = Decimal(0)
    for flavor_usage in (queue.get("status") or {}).get("flavorsUsage") or []:
        if flavor_usage.get("name") != flavor:
            continue
        for usage in flavor_usage.get("resources") or []:
            if usage.get("name") == resource:
                used = Decimal(parse_quantity(usage.get("total", "0")))
    for group in (queue.get("spec") or {}).get("resourceGroups") or []:
        for flavor_quota in group.get("flavors") or []:
            if flavor_quota.get("name") != flavor:
                continue
            for quota in flavor_quota.get("resources") or []:
                if quota.get("name") != resource:
                    continue
                nominal = Decimal(parse_quantity(quota.get("nominalQuota", "0")))
                if quota.get("borrowingLimit") is None:
                    return used, None
                return used, nominal + Decimal(parse_quantity(quota["borrowingLimit"]))
    return used, Decimal(0)


def _workload_wait(workload: dict, objects: NamespaceObjects) -> Wait | None:
    spec = workload.get("spec") or {}
    if spec.get("active") is False or _is_true(workload, "Finished"):
        return None
    if _is_true(workload, "QuotaReserved") or _is_true(workload, "Admitted"):
        return None
    name = _name(workload)
    queue = objects.local_queues.get(spec.get("queueName", ""), "")
    preempted = _condition(workload, "Preempted")
    pending = _condition(workload, "QuotaReserved")
    since = (pending or {}).get("lastTransitionTime", "") or (
        (workload.get("metadata") or {}).get("creationTimestamp", "")
    )
    message = (pending or {}).get("message", "")
    if preempted and preempted.get("status") == "True":
        # Evicted to make room, and not admitted again since.
        why = preempted.get("reason", "")
        if why in RECLAIM_REASONS or why == "InClusterQueue":
            reason = RECLAIMED if why in RECLAIM_REASONS else PREEMPTED_BY_PRIORITY
            detail = preempted.get("message", "")
            return Wait("Workload", name, reason, _cut(detail), since, queue=queue)
    if found := _MAX_CAPACITY.search(message):
        return Wait("Workload", name, QUEUE_AT_CAP, _cut(message), since, found["resource"], queue)
    if found := _UNUSED.search(message):
        resource, flavor = found["resource"], found["flavor"].strip()
        cluster_queue = objects.cluster_queues.get(queue) or {}
        used, ceiling = _queue_room(cluster_queue, flavor, resource)
        request = _workload_request(workload, resource)
        at_cap = ceiling is not None and used + request > ceiling
        return Wait(
            "Workload",
            name,
            QUEUE_AT_CAP if at_cap else NOTHING_TO_LEND,
            _cut(message),
            since,
            resource,
            queue,
        )
    if not pending:
        return None  # not yet tried by Kueue's scheduler: too early to tell
    return Wait("Workload", name, OTHER, _cut(message or "waiting for Kueue"), since, queue=queue)


QUEUE_QUOTA_INSUFFICIENT = "queue resource quota insufficient"


def _pod_group_events(objects: NamespaceObjects) -> dict[str, dict]:
    """Per PodGroup, its latest ``Unschedulable`` event: the latest "queue resource quota
    insufficient" one where there is one (Volcano records it, as a Normal event, each cycle
    the PodGroup stays out of its queue, beside its Warning events of the gang)."""
    latest: dict[tuple[str, bool], tuple[datetime, dict]] = {}
    for event in objects.events:
        involved = event.get("involvedObject") or {}
        if involved.get("kind") != "PodGroup" or event.get("reason") != "Unschedulable":
            continue
        seen = _event_time(event) or datetime.min.replace(tzinfo=UTC)
        key = (involved.get("name", ""), QUEUE_QUOTA_INSUFFICIENT in event.get("message", ""))
        if key not in latest or seen > latest[key][0]:
            latest[key] = (seen, event)
    found: dict[str, dict] = {}
    for (name, _about_queue), (_seen, event) in sorted(latest.items(), key=lambda i: i[0][1]):
        found[name] = event  # the queue's, where there is one, comes last and wins
    return found


def _pod_group_wait(group: dict, events: dict[str, dict]) -> Wait | None:
    phase = (group.get("status") or {}).get("phase", "")
    if phase not in ("Pending", "Inqueue"):
        return None
    name = _name(group)
    queue = (group.get("spec") or {}).get("queue", "")
    condition = _condition(group, "Unschedulable")
    since = (group.get("metadata") or {}).get("creationTimestamp", "")
    event = events.get(name) or {}
    if phase == "Pending" and QUEUE_QUOTA_INSUFFICIENT in event.get("message", ""):
        # Not let into its queue (Volcano's enqueue checks the queue's capability first).
        message = event["message"]
        found = re.search(r"insufficient ([a-z0-9./-]+)\s*$", message)
        resource = found.group(1) if found else ""
        return Wait("PodGroup", name, QUEUE_AT_CAP, _cut(message), since, resource, queue)
    message = ""
    if condition and condition.get("status") == "True":
        message = condition.get("message", "")
        since = condition.get("lastTransitionTime", since)
    message = message or event.get("message", "")
    if not message:
        return None
    lowered = message.lower()
    if "insufficient" in lowered or "nodes are" in lowered or "unschedulable" in lowered:
        return Wait("PodGroup", name, NO_NODE_FITS, _cut(message), since, queue=queue)
    return Wait("PodGroup", name, OTHER, _cut(message), since, queue=queue)


def _pod_wait(pod: dict, grouped: set[str]) -> Wait | None:
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    if status.get("phase") != "Pending" or meta.get("deletionTimestamp"):
        return None
    gates = {g.get("name") for g in spec.get("schedulingGates") or []}
    if KUEUE_GATE in gates:
        return None  # its Workload says why
    if (meta.get("annotations") or {}).get(VOLCANO_GROUP_ANNOTATION) in grouped:
        return None  # its PodGroup says why
    condition = _condition(pod, "PodScheduled")
    if not condition or condition.get("status") != "False":
        return None  # scheduled (pulling its image, starting): not waiting for room
    message = condition.get("message", "")
    since = condition.get("lastTransitionTime", "") or meta.get("creationTimestamp", "")
    if condition.get("reason") == "Unschedulable":
        return Wait("Pod", _name(pod), NO_NODE_FITS, _cut(message), since)
    if condition.get("reason") == "SchedulingGated":
        return Wait("Pod", _name(pod), OTHER, _cut(message or "held by a scheduling gate"), since)
    return Wait("Pod", _name(pod), OTHER, _cut(message), since)


def namespace_waits(objects: NamespaceObjects, *, now: datetime | None = None) -> list[Wait]:
    """Everything of the namespace that waits, with its reason: controllers whose pods are
    refused, Workloads Kueue holds, PodGroups Volcano holds, pods no node takes."""
    now = now or datetime.now(UTC)
    waits = _failed_creates(objects, now)
    waits += [w for w in (_workload_wait(wl, objects) for wl in objects.workloads) if w]
    events = _pod_group_events(objects)
    group_waits = [w for w in (_pod_group_wait(g, events) for g in objects.pod_groups) if w]
    waits += group_waits
    grouped = {w.name for w in group_waits}
    waits += [w for w in (_pod_wait(pod, grouped) for pod in objects.pods) if w]
    return waits
