"""Pushing a cluster's desired state to its API server.

A sync compares every desired object with the live one (only the fields the portal owns),
writes what differs, prunes what the portal wrote but no longer wants, and detects drift: a
live object that differs from what the portal last wrote was changed by someone else. One sync
per cluster at a time (a lease with a fencing epoch); every object written carries the plan
generation, and a sync never overwrites an object written by a newer generation, so an older
change can never land after a newer one. Every run is recorded.
"""

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import timedelta

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from quotas.kube.client import (
    KINDS,
    KubeClient,
    KubeConflict,
    KubeError,
    KubeNotFound,
    client_for_cluster,
)
from quotas.kube.diff import differences, live_view, owned, union_shape
from quotas.kube.objects import ObjectKey
from quotas.kube.order import DELETE, PARENT_FIELD, Step, write_order
from quotas.kube.plan import AllocationChange, ClusterPlan, cluster_plan, plan_with_changes
from quotas.kube.render import (
    CLUSTER_LABEL,
    GENERATION_ANNOTATION,
    MANAGED_BY_LABEL,
    TEAM_LABEL,
    YUNIKORN_QUEUES_KEY,
    render_cluster,
)
from quotas.kube.render import render_namespace as render_namespace_objects
from quotas.models import (
    Cluster,
    DriftEvent,
    ManagedObject,
    SyncLease,
    SyncObjectResult,
    SyncRequest,
    SyncRun,
)
from quotas.signals import sync_finished

log = logging.getLogger(__name__)

# The lease is renewed when a quarter of its time has passed (a database write each time).
RENEW_AFTER_SHARE = 0.25
CONFLICT_RETRIES = 3
# Longest run of writes sent at the same time between two looks at the lease.
CONCURRENT_BATCH_MAX = 200
Action = SyncObjectResult.Action


class SyncBusy(Exception):
    """Another worker holds the cluster's lease."""


class LeaseLost(Exception):
    """The lease expired under us (a long stall); stop writing at once."""


class TransientSyncError(Exception):
    """Some objects failed for reasons worth retrying (429, 5xx, timeouts, connections)."""


# --- the lease ---------------------------------------------------------------------------


def lease_ttl() -> timedelta:
    return timedelta(seconds=settings.SYNC_LEASE_SECONDS)


def lease_acquire(cluster_id: int, holder: str, ttl: timedelta | None = None) -> int | None:
    """Take the cluster's lease if it is free or expired; returns the new epoch, or None."""
    ttl = lease_ttl() if ttl is None else ttl
    SyncLease.objects.get_or_create(cluster_id=cluster_id)
    now = timezone.now()
    taken = (
        SyncLease.objects.filter(cluster_id=cluster_id)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__lt=now))
        .update(holder=holder, expires_at=now + ttl, epoch=F("epoch") + 1)
    )
    if not taken:
        return None
    return SyncLease.objects.get(cluster_id=cluster_id).epoch


def lease_renew(cluster_id: int, holder: str, epoch: int) -> None:
    renewed = SyncLease.objects.filter(cluster_id=cluster_id, holder=holder, epoch=epoch).update(
        expires_at=timezone.now() + lease_ttl()
    )
    if not renewed:
        raise LeaseLost(f"lease of cluster {cluster_id} was taken over")


def lease_release(cluster_id: int, holder: str, epoch: int) -> None:
    SyncLease.objects.filter(cluster_id=cluster_id, holder=holder, epoch=epoch).update(
        holder="", expires_at=None
    )


def _lease_release_after_sync(cluster_id: int, holder: str, epoch: int) -> None:
    """Release the lease even when the sync lost its database connection (a failover, a
    restart): on a new connection, or the cluster waits out SYNC_LEASE_SECONDS before anyone
    syncs it again."""
    try:
        lease_release(cluster_id, holder, epoch)
    except (OperationalError, InterfaceError):
        if connection.in_atomic_block:
            raise  # a caller's transaction is broken: theirs to handle
        connection.close()
        lease_release(cluster_id, holder, epoch)


ABANDONED_RUN_ERROR = (
    "abandoned: the worker running this sync stopped before it finished (its lease expired); "
    "the next sync of the cluster did its work"
)


def runs_close_abandoned(cluster_id: int) -> int:
    """Mark the cluster's runs still "running" as failed; call holding the lease.

    Only the lease holder runs a sync, so a run left "running" when the lease is taken belongs
    to a worker that died mid-sync (killed, out of memory, its machine gone) and would show as
    running for ever. Its sync requests were never completed: the new run picks them up.
    """
    return SyncRun.objects.filter(cluster_id=cluster_id, status=SyncRun.Status.RUNNING).update(
        status=SyncRun.Status.FAILED, finished_at=timezone.now(), error=ABANDONED_RUN_ERROR
    )


# --- one object ---------------------------------------------------------------------------


@dataclass
class Outcome:
    key: ObjectKey
    action: str
    diff: list = field(default_factory=list)
    error: str = ""
    transient: bool = False
    applied: dict | None = None  # owned view now in the cluster (for ManagedObject)
    drift: list = field(default_factory=list)
    drift_restored: bool = False
    live: dict | None = None  # the object as the API server answered the write


def _generation_of(live: dict | None) -> int:
    if not live:
        return -1
    value = (live.get("metadata", {}).get("annotations") or {}).get(GENERATION_ANNOTATION)
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1


def _with_generation(obj: dict, generation: int) -> dict:
    meta = obj["metadata"]
    annotations = {**(meta.get("annotations") or {}), GENERATION_ANNOTATION: str(generation)}
    return {**obj, "metadata": {**meta, "annotations": annotations}}


def _is_ours(live: dict, plan: ClusterPlan) -> bool:
    labels = (live.get("metadata") or {}).get("labels") or {}
    return (
        labels.get(MANAGED_BY_LABEL) == plan.managed_by and labels.get(CLUSTER_LABEL) == plan.name
    )


def _pointer(*parts: str) -> str:
    """A JSON pointer (RFC 6901) from path parts."""
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


# Group-versions of the schedulers: (backend name, what to install when it is missing).
BACKEND_APIS = {
    "scheduling.volcano.sh/v1beta1": ("Volcano", "install Volcano with its CRDs"),
    "kueue.x-k8s.io/v1beta2": ("Kueue", "Kueue v0.15 or newer is needed"),
}
# Kinds shared with their owner: pruning removes only the portal's keys, never the object.
SHARED_KINDS = frozenset({("v1", "ConfigMap")})
# Beyond this many objects of a kind to read, one LIST is cheaper than a GET each.
LIST_ABOVE = 20
# Up to this many names (namespaces) written, a run reads back only the records of those
# names (namespaces); else all of them.
RECORD_NAMES_MAX = 500


def backend_problems(plan: ClusterPlan, client: KubeClient, api_versions) -> list[dict]:
    """Discovery before anything is written: one message per group-version the plan needs
    but the API server does not serve (a scheduler not installed, or too old)."""
    problems = []
    needed: dict[str, set[str]] = {}
    for api_version, kind in api_versions:
        # Kubernetes' own groups are served by every supported version; schedulers' are not.
        if api_version in BACKEND_APIS:
            needed.setdefault(api_version, set()).add(KINDS[(api_version, kind)].plural)
    for api_version, plurals in sorted(needed.items()):
        served = client.served_resources(api_version)
        missing = sorted(plurals - (served or set()))
        if not missing:
            continue
        name, hint = BACKEND_APIS[api_version]
        what = api_version if served is None else f"{', '.join(missing)} in {api_version}"
        message = (
            f"{name} is enabled for cluster {plan.name} but the API server does not serve {what}"
        )
        problems.append(
            {
                "backend": name,
                "api_version": api_version,
                "message": f"{message} ({hint})",
            }
        )
    return problems


def with_served_apis(plan: ClusterPlan, client: KubeClient) -> ClusterPlan:
    """The plan told what the API server serves that only some Kubernetes versions do: the v1
    MutatingAdmissionPolicy (1.36+), which only the Volcano queue policy uses."""
    if "volcano" not in plan.backends:
        return plan
    served = client.served_resources("admissionregistration.k8s.io/v1") or set()
    return replace(plan, mutating_policies_served="mutatingadmissionpolicies" in served)


@dataclass
class _ExecutionState:
    """What earlier steps of a run tell later ones."""

    failed_namespaces: set[str] = field(default_factory=set)
    created_namespaces: set[str] = field(default_factory=set)  # by a dry run: not real yet
    stopped: set[ObjectKey] = field(default_factory=set)  # an intermediate write failed


def concurrent_batches(steps: list[Step]) -> Iterator[list[Step]]:
    """The steps cut into batches that may be written at the same time: runs of applies of one
    non-hierarchical kind (all Namespaces, then all ResourceQuotas, ...), at most
    CONCURRENT_BATCH_MAX long; deletes, hierarchy writes (Volcano queues, Kueue cohorts, whose
    order the webhook checks) and two-step writes go one by one, in order."""
    batch: list[Step] = []
    for step in steps:
        kind = step.key.group_kind
        alone = step.op == DELETE or step.intermediate or kind in PARENT_FIELD
        if batch and (
            alone
            or kind != (batch[0].key[0], batch[0].key[1])
            or len(batch) >= CONCURRENT_BATCH_MAX
        ):
            yield batch
            batch = []
        if alone:
            yield [step]
        else:
            batch.append(step)
    if batch:
        yield batch


class ClusterSyncer:
    """Compares and writes the objects of one plan; no database writes happen in here.

    Every write is a server-side apply with the portal's one field manager, so fields other
    managers own stay as they are. With `only_changed`, objects whose desired fields equal
    what the portal last applied (its ManagedObject record) are neither read nor written: a
    sync after an approval costs what the approval changed; the periodic reconcile compares
    everything and finds drift.
    """

    def __init__(
        self,
        *,
        plan: ClusterPlan,
        mode: str,
        client: KubeClient,
        managed: dict[ObjectKey, dict],
        renew=lambda: None,
        dry_run: bool = False,
        only_changed: bool = False,
        concurrency: int = 1,
    ):
        self.plan = plan
        self.mode = mode
        self.client = client
        self.managed = managed
        self.renew = renew
        self.dry_run = dry_run
        self.only_changed = only_changed
        self.field_manager = plan.managed_by
        self.concurrency = max(1, concurrency)
        self.writes = 0
        self._writes_lock = threading.Lock()
        self.problems: list[dict] = []

    def live_objects(self, skip_versions: set[str]) -> dict[ObjectKey, dict]:
        selector = f"{MANAGED_BY_LABEL}={self.plan.managed_by},{CLUSTER_LABEL}={self.plan.name}"
        live: dict[ObjectKey, dict] = {}
        for api_version, kind in KINDS:
            if kind == "Pod" or api_version in skip_versions:
                continue
            for item in self._list(api_version, kind, selector):
                live[ObjectKey.of(item)] = item
        return live

    def _list(self, api_version: str, kind: str, selector: str) -> list[dict]:
        try:
            return self.client.list(api_version, kind, label_selector=selector)
        except KubeError as exc:
            if exc.status == 404:  # the scheduler's CRD is not installed here
                return []
            raise

    def read_objects(self, keys: list[ObjectKey]) -> dict[ObjectKey, dict]:
        """The live objects of `keys` (missing ones left out): a GET each, or one LIST per
        kind when many objects of it are wanted."""
        by_kind: dict[tuple[str, str], list[ObjectKey]] = {}
        for key in keys:
            by_kind.setdefault(key.group_kind, []).append(key)
        selector = f"{MANAGED_BY_LABEL}={self.plan.managed_by},{CLUSTER_LABEL}={self.plan.name}"
        live: dict[ObjectKey, dict] = {}
        for (api_version, kind), wanted in by_kind.items():
            if len(wanted) > LIST_ABOVE:
                found = {ObjectKey.of(o): o for o in self._list(api_version, kind, selector)}
                live.update({k: found[k] for k in wanted if k in found})
                continue
            for key in wanted:
                obj = self.client.get(*key)
                if obj is not None:
                    obj.setdefault("apiVersion", api_version)
                    obj.setdefault("kind", kind)
                    live[key] = obj
        return live

    def run(self) -> list[Outcome]:
        self.plan = with_served_apis(self.plan, self.client)
        rendered = render_cluster(self.plan)
        self.problems = backend_problems(
            self.plan, self.client, {(o["apiVersion"], o["kind"]) for o in rendered}
        )
        # Objects of a scheduler the API server does not serve are neither written nor pruned.
        unserved = {p["api_version"] for p in self.problems}
        desired = [o for o in rendered if o["apiVersion"] not in unserved]
        shadow_keys: set[ObjectKey] = set()
        for ns in self.plan.namespaces:
            if ns.shadow:
                shadow_keys |= {ObjectKey.of(o) for o in render_namespace_objects(self.plan, ns)}
        wanted = {ObjectKey.of(o) for o in desired}
        outcomes: list[Outcome] = []
        if self.only_changed:
            to_compare = []
            for obj in desired:
                key = ObjectKey.of(obj)
                if key not in shadow_keys and self.managed.get(key) == owned(obj):
                    # As the portal last applied it; drift is the reconcile's business.
                    outcomes.append(Outcome(key, Action.UNCHANGED))
                else:
                    to_compare.append(obj)
            gone = [k for k in self.managed if k not in wanted and k.api_version not in unserved]
            live = self.read_objects([ObjectKey.of(o) for o in to_compare] + gone)
            prune = [k for k in gone if k in live and _is_ours(live[k], self.plan)]
            # Already gone from the cluster: only the record is left to drop.
            outcomes += [Outcome(k, Action.DELETED) for k in gone if k not in live]
        else:
            to_compare = desired
            live = self.live_objects(unserved)
            prune = sorted(k for k in live if k not in wanted)
        outcomes += self._execute(write_order(to_compare, live, prune), live, shadow_keys)
        return outcomes

    def _execute(
        self, steps: list[Step], live: dict[ObjectKey, dict], shadow_keys
    ) -> list[Outcome]:
        outcomes: list[Outcome] = []
        state = _ExecutionState()
        renew_every = settings.SYNC_LEASE_SECONDS * RENEW_AFTER_SHARE
        renew_at = time.monotonic() + renew_every
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            for batch in concurrent_batches(steps):
                if time.monotonic() >= renew_at:
                    self.renew()
                    renew_at = time.monotonic() + renew_every
                if len(batch) > 1 and self.concurrency > 1:
                    # Independent writes (same kind, no hierarchy among them) go out together;
                    # what they found is taken in afterwards, in order.
                    written = list(
                        pool.map(lambda step: self._step(step, live, shadow_keys, state), batch)
                    )
                else:
                    written = [self._step(step, live, shadow_keys, state) for step in batch]
                for step, outcome in zip(batch, written, strict=True):
                    self._take_in(step, outcome, live, state, outcomes)
        return outcomes

    def _step(
        self, step: Step, live: dict[ObjectKey, dict], shadow_keys, state: _ExecutionState
    ) -> Outcome | None:
        """One write or delete; None when the step is skipped (a stopped intermediate write)."""
        key = step.key
        if step.op == DELETE:
            return self.prune(key, live[key])
        if key in state.stopped:
            return None
        namespace = key.namespace
        if namespace and namespace in state.failed_namespaces:
            return Outcome(
                key, Action.ERROR, error=f"namespace {namespace} not written yet", transient=True
            )
        return self.sync_object(
            step.obj,
            live.get(key),
            shadow=key in shadow_keys,
            new_namespace=namespace in state.created_namespaces,
        )

    def _take_in(
        self,
        step: Step,
        outcome: Outcome | None,
        live: dict[ObjectKey, dict],
        state: _ExecutionState,
        outcomes: list[Outcome],
    ) -> None:
        if outcome is None:
            return
        key = step.key
        if step.op == DELETE:
            outcomes.append(outcome)
            return
        if outcome.live is not None and not self.dry_run:
            live[key] = outcome.live
        if step.intermediate:
            if outcome.action in (Action.ERROR, Action.FENCED):
                state.stopped.add(key)
                outcomes.append(outcome)
            return
        if key.kind == "Namespace":
            if outcome.action == Action.ERROR:
                state.failed_namespaces.add(key.name)
            elif outcome.action == Action.CREATED and self.dry_run:
                state.created_namespaces.add(key.name)
        outcomes.append(outcome)

    def _count_write(self) -> None:
        with self._writes_lock:
            self.writes += 1

    def sync_object(
        self, obj: dict, live: dict | None, *, shadow: bool, new_namespace: bool = False
    ) -> Outcome:
        key = ObjectKey.of(obj)
        desired_view = owned(obj)
        applied_view = self.managed.get(key)
        for _attempt in range(CONFLICT_RETRIES):
            decision = self._decide(key, desired_view, applied_view, live, shadow=shadow)
            if isinstance(decision, Outcome):
                return decision
            changes, drift = decision
            try:
                return self._write(key, obj, desired_view, live, changes, drift)
            except KubeConflict:
                # Changed since we read it (or written by a newer sync): read and decide again.
                try:
                    live = self.client.get(*key)
                except KubeError as exc:
                    return Outcome(key, Action.ERROR, error=str(exc), transient=exc.transient)
            except KubeNotFound as exc:
                if self.dry_run and new_namespace:
                    # A dry run cannot create into a namespace the same dry run only pretended
                    # to create (a real API server answers 404): it will be created.
                    return Outcome(key, Action.CREATED, diff=changes, drift=drift)
                return Outcome(key, Action.ERROR, error=str(exc), transient=exc.transient)
            except KubeError as exc:
                return Outcome(key, Action.ERROR, error=str(exc), transient=exc.transient)
        return Outcome(key, Action.ERROR, error="kept conflicting; retried later", transient=True)

    def _decide(
        self,
        key: ObjectKey,
        desired_view: dict,
        applied_view: dict | None,
        live: dict | None,
        *,
        shadow: bool,
    ) -> Outcome | tuple[list, list]:
        """The outcome when nothing is to be written, else (changes, drift) to write."""
        drift: list = []
        if applied_view is not None:
            if live is None:
                drift = [{"path": "", "old": "present", "new": "deleted"}]
            else:
                drift = differences(applied_view, live_view(live, applied_view))
        if live is None:
            changes = differences({}, desired_view)
        else:
            # At the shape of both views: a field the portal applied before and no longer
            # wants is a change too (the apply removes it).
            shape = union_shape(applied_view or {}, desired_view)
            changes = differences(live_view(live, shape), desired_view)
        if live is not None and not changes:
            return Outcome(key, Action.UNCHANGED, applied=desired_view)
        if _generation_of(live) > self.plan.generation:
            return Outcome(key, Action.FENCED, diff=changes)
        if shadow or self.mode == Cluster.SyncMode.SHADOW:
            return Outcome(key, Action.SHADOW, diff=changes, drift=drift)
        approved_change = applied_view is None or bool(differences(applied_view, desired_view))
        if drift and not approved_change and self.mode == Cluster.SyncMode.REPORT_ONLY:
            return Outcome(key, Action.DRIFT_REPORTED, diff=changes, drift=drift)
        return changes, drift

    def _write(
        self,
        key: ObjectKey,
        obj: dict,
        desired_view: dict,
        live: dict | None,
        changes: list,
        drift: list,
    ) -> Outcome:
        body = _with_generation(obj, self.plan.generation)
        if live is not None:
            # The fence: the apply fails with 409 if the object changed since it was read
            # (maybe by a newer sync), and is then read and decided again.
            body["metadata"] = {
                **body["metadata"],
                "resourceVersion": live["metadata"].get("resourceVersion"),
            }
        result = self.client.apply(
            body, field_manager=self.field_manager, force=True, dry_run=self.dry_run
        )
        if self.dry_run:
            # What the API server says the object would become.
            before = live_view(live, desired_view) if live is not None else {}
            changes = differences(before, live_view(result or {}, desired_view))
            return Outcome(
                key, Action.UPDATED if live else Action.CREATED, diff=changes, drift=drift
            )
        self._count_write()
        if drift:
            action = Action.DRIFT_RESTORED
        elif live is None:
            action = Action.CREATED
        else:
            action = Action.UPDATED
        return Outcome(
            key,
            action,
            diff=changes,
            applied=desired_view,
            drift=drift,
            drift_restored=bool(drift),
            live=result,
        )

    def prune(self, key: ObjectKey, live: dict) -> Outcome:
        if key.kind == "Namespace":
            # Deleting a namespace deletes every workload in it: never done automatically.
            return Outcome(key, Action.ORPHANED)
        if self.mode == Cluster.SyncMode.SHADOW:
            return Outcome(key, Action.SHADOW, diff=[{"path": "", "old": "present", "new": None}])
        if _generation_of(live) > self.plan.generation:
            return Outcome(key, Action.FENCED)
        diff: list = []
        for attempt in range(CONFLICT_RETRIES):
            try:
                if key.group_kind in SHARED_KINDS:
                    diff = self._release(key, live)
                else:
                    self.client.delete(
                        *key,
                        resource_version=live["metadata"].get("resourceVersion"),
                        dry_run=self.dry_run,
                    )
                break
            except KubeConflict as exc:
                # Changed since it was read. Schedulers write their queues' status all the
                # time (Volcano every few seconds): read it again and delete it if it is still
                # ours and no newer sync wrote it; else the next sync looks again.
                try:
                    live = self.client.get(*key)
                except KubeError as read_exc:
                    return Outcome(key, Action.ERROR, error=str(read_exc), transient=True)
                if live is None:
                    return Outcome(key, Action.DELETED)
                if not _is_ours(live, self.plan) or _generation_of(live) > self.plan.generation:
                    return Outcome(key, Action.FENCED)
                if attempt == CONFLICT_RETRIES - 1:
                    return Outcome(key, Action.ERROR, error=str(exc), transient=True)
            except KubeError as exc:
                if exc.status == 404:
                    return Outcome(key, Action.DELETED)
                return Outcome(key, Action.ERROR, error=str(exc), transient=exc.transient)
        self._count_write()
        return Outcome(key, Action.DELETED, diff=diff)

    def _release(self, key: ObjectKey, live: dict) -> list[dict]:
        """Take the portal's keys, labels and annotation off a shared object (YuniKorn's
        ConfigMap holds the scheduler's own settings too); the object stays."""
        meta = live.get("metadata") or {}
        owned_data = (self.managed.get(key) or {}).get("data") or {YUNIKORN_QUEUES_KEY: ""}
        operations = [
            {
                "op": "test",
                "path": "/metadata/resourceVersion",
                "value": meta.get("resourceVersion"),
            }
        ]
        diff = []
        for name in sorted(owned_data):
            if name in (live.get("data") or {}):
                operations.append({"op": "remove", "path": _pointer("data", name)})
                diff.append({"path": f"data.{name}", "old": "present", "new": None})
        for section, names in (
            ("labels", (MANAGED_BY_LABEL, CLUSTER_LABEL, TEAM_LABEL)),
            ("annotations", (GENERATION_ANNOTATION,)),
        ):
            for name in names:
                if name in (meta.get(section) or {}):
                    operations.append({"op": "remove", "path": _pointer("metadata", section, name)})
        self.client.patch_json(
            *key, operations, field_manager=self.field_manager, dry_run=self.dry_run
        )
        return diff


# --- a whole cluster ----------------------------------------------------------------------


def _holder(worker: str) -> str:
    return f"{worker or socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def cluster_sync(
    *,
    cluster_id: int,
    trigger: str = SyncRun.Trigger.CHANGE,
    worker: str = "",
    client: KubeClient | None = None,
) -> SyncRun:
    """Sync one cluster now; raises SyncBusy if another sync holds it and TransientSyncError
    (after recording the run) when some objects should be retried."""
    holder = _holder(worker)
    epoch = lease_acquire(cluster_id, holder)
    if epoch is None:
        raise SyncBusy(f"cluster {cluster_id} is being synced by another worker")
    started = time.monotonic()
    try:
        with transaction.atomic():
            runs_close_abandoned(cluster_id)
            cluster = Cluster.objects.get(pk=cluster_id)
            # Every change up to the cluster's generation is committed by now (each held the
            # cluster's row until its commit), and so are their sync requests.
            pending = list(
                SyncRequest.objects.filter(
                    cluster_id=cluster_id,
                    status__in=[SyncRequest.Status.PENDING, SyncRequest.Status.FAILED],
                    generation__lte=cluster.plan_generation,
                ).values_list("id", "namespaces")
            )
            request_ids = [request_id for request_id, _ in pending]
            touched = changed_namespaces(cluster, trigger, [names for _, names in pending])
            plan = cluster_plan(cluster, namespaces=touched)
            run = SyncRun.objects.create(
                cluster=cluster,
                trigger=trigger,
                mode=cluster.sync_mode,
                generation=plan.generation,
                worker=worker,
            )
        managed = _last_applied(cluster_id, plan if touched is not None else None)
        outcomes, problems, error, transient = _run_syncer(
            cluster=cluster,
            plan=plan,
            managed=managed,
            client=client,
            renew=lambda: lease_renew(cluster_id, holder, epoch),
            # After an approval, compare only what changed; the reconcile compares all.
            only_changed=trigger == SyncRun.Trigger.CHANGE,
        )
        _record(run, cluster_id, plan, outcomes, problems, error, request_ids, started, managed)
        if (error or any(o.action == Action.ERROR for o in outcomes)) and transient:
            raise TransientSyncError(error or run.error)
        return run
    finally:
        _lease_release_after_sync(cluster_id, holder, epoch)


def _run_syncer(
    *, cluster, plan, managed, client, renew, only_changed
) -> tuple[list[Outcome], list[dict], str, bool]:
    """Run the comparison and writes; returns (outcomes, backend problems, error of the whole
    run, transient)."""
    own_client = client is None
    syncer = None
    try:
        if own_client:
            client = client_for_cluster(cluster, timeout=settings.KUBE_REQUEST_TIMEOUT)
        syncer = ClusterSyncer(
            plan=plan,
            mode=cluster.sync_mode,
            client=client,
            managed=managed,
            renew=renew,
            only_changed=only_changed,
            concurrency=settings.SYNC_CONCURRENCY,
        )
        outcomes = syncer.run()
    except LeaseLost as exc:
        return [], [], str(exc), True
    except KubeError as exc:
        return [], syncer.problems if syncer else [], str(exc), exc.transient
    except Exception as exc:
        # A broken kubeconfig, a bug: recorded as a failed run instead of a run stuck "running".
        log.exception("sync of cluster %s failed", cluster.name)
        return [], [], f"{type(exc).__name__}: {exc}"[:2000], False
    finally:
        if own_client and client is not None:
            client.close()
    problems = syncer.problems
    # A missing scheduler is not fixed by retrying soon: the run fails, not transiently.
    transient = any(o.transient for o in outcomes)
    error = "; ".join(p["message"] for p in problems)
    return outcomes, problems, error, transient


def changed_namespaces(cluster: Cluster, trigger: str, requested: list) -> set[str] | None:
    """The team namespaces a sync after a change needs to plan, from the namespaces its
    pending sync requests name; None (plan everything) when that cannot be bounded.

    Everything else is as the portal last applied it: each change names what it changed in
    its sync request, and a request is done only once a run that planned it succeeded (a
    failed run leaves it pending for the next one). Kueue's ClusterQueues and YuniKorn's
    queues.yaml are rendered from every namespace's guarantees, so those clusters are planned
    whole; so is a cluster in shadow mode, where nothing is ever recorded as applied.
    """
    if trigger != SyncRun.Trigger.CHANGE or not requested or None in requested:
        return None
    if cluster.sync_mode == Cluster.SyncMode.SHADOW:
        return None
    if {"kueue", "yunikorn"} & set(cluster.backends):
        return None
    return {name for names in requested for name in names}


# Cluster-wide kinds rendered from totals of the whole cluster: few objects, always planned.
CLUSTER_WIDE_KINDS = (
    "PriorityClass",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
)


def _last_applied(cluster_id: int, plan: ClusterPlan | None = None) -> dict[ObjectKey, dict]:
    """What the portal last applied to the cluster, object by object (its owned fields).

    With `plan`, a plan of some namespaces: only the records of what it renders or could have
    rendered before (so what it no longer wants is pruned): objects in or named after its
    namespaces, its departments' queues and the cluster-wide kinds.
    """
    rows = ManagedObject.objects.filter(cluster_id=cluster_id)
    if plan is not None:
        names = [ns.name for ns in plan.namespaces]
        departments = sorted({d for ns in plan.namespaces for d in ns.team.ancestors})
        rows = rows.filter(
            Q(namespace__in=names)
            | Q(namespace="", kind__in=("Namespace", "Queue"), name__in=names)
            | Q(namespace="", kind="Queue", name__in=departments)
            | Q(namespace="", kind__in=CLUSTER_WIDE_KINDS)
        )
    return {ObjectKey.of_row(m): m.applied for m in rows}


def _record(
    run, cluster_id, plan, outcomes, problems, error, request_ids, started, managed
) -> None:
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.action] = counts.get(o.action, 0) + 1
    failures = [o for o in outcomes if o.action == Action.ERROR]
    if failures:
        listed = "; ".join(f"{o.key[1]} {o.key[2]}/{o.key[3]}: {o.error}" for o in failures[:5])
        if len(failures) > 5:
            listed += f"; and {len(failures) - 5} more"
        error = f"{error}; {listed}" if error else listed
    now = timezone.now()
    with transaction.atomic():
        SyncObjectResult.objects.bulk_create(
            [
                SyncObjectResult(
                    run=run,
                    **o.key.row_fields(),
                    action=o.action,
                    diff=o.diff,
                    error=o.error,
                )
                for o in outcomes
                # Rows for what changed only; unchanged objects are in the counts.
                if o.action != Action.UNCHANGED
            ],
            batch_size=500,
        )
        written = [o for o in outcomes if o.applied is not None]
        if written:
            # The keys only: what each row last applied is in ``managed``, read at the start
            # of this sync under the same lease (decoding every row's JSON again cost more
            # than the writes after one approval on a large cluster).
            rows = ManagedObject.objects.filter(cluster_id=cluster_id)
            names = {o.key.name for o in written}
            if len(names) <= RECORD_NAMES_MAX:
                rows = rows.filter(name__in=sorted(names))
            # By namespace too: every namespace's quota may have the same name.
            namespaces = {o.key.namespace for o in written}
            if len(namespaces) <= RECORD_NAMES_MAX:
                rows = rows.filter(namespace__in=sorted(namespaces))
            existing = {
                ObjectKey.of_row(m): m
                for m in rows.only("id", "api_version", "kind", "namespace", "name")
            }
            to_create, to_update = [], []
            for o in written:
                row = existing.get(o.key)
                if row is None:
                    to_create.append(
                        ManagedObject(
                            cluster_id=cluster_id,
                            **o.key.row_fields(),
                            applied=o.applied,
                            generation=plan.generation,
                        )
                    )
                elif managed.get(o.key) != o.applied:
                    row.applied, row.generation = o.applied, plan.generation
                    to_update.append(row)
            ManagedObject.objects.bulk_create(to_create, batch_size=500, ignore_conflicts=True)
            ManagedObject.objects.bulk_update(to_update, ["applied", "generation"], batch_size=500)
        deleted = [o.key for o in outcomes if o.action == Action.DELETED]
        for key in deleted:
            ManagedObject.objects.filter(cluster_id=cluster_id, **key.row_fields()).delete()
        DriftEvent.objects.bulk_create(
            [
                DriftEvent(
                    cluster_id=cluster_id,
                    run=run,
                    **o.key.row_fields(),
                    changes=o.drift,
                    restored=o.drift_restored,
                )
                for o in outcomes
                if o.drift
            ]
        )
        ok = not error
        run.status = SyncRun.Status.SUCCEEDED if ok else SyncRun.Status.FAILED
        run.finished_at = now
        run.duration_ms = int((time.monotonic() - started) * 1000)
        run.objects_total = len(outcomes)
        run.counts = counts
        run.error = error[:10000]
        run.backend_problems = problems
        run.save()
        transaction.on_commit(
            lambda: sync_finished.send(sender=SyncRun, run_id=run.id, request_ids=request_ids)
        )
        requests = SyncRequest.objects.filter(id__in=request_ids)
        # Every run a sync request was part of is an attempt, the one that succeeded too (a
        # sync done at its first run has made one attempt, not none).
        if ok:
            requests.update(
                status=SyncRequest.Status.DONE,
                attempts=F("attempts") + 1,
                completed_at=now,
                sync_run=run,
            )
        else:
            requests.update(
                status=SyncRequest.Status.FAILED,
                attempts=F("attempts") + 1,
                last_error=error[:2000],
                sync_run=run,
            )


def cluster_preview(
    *,
    cluster_id: int,
    client: KubeClient | None = None,
    changes: list[AllocationChange] | None = None,
) -> list[Outcome]:
    """What a sync would change now (or with `changes`, a pending request's values, applied),
    checked by the API server with dry-run writes.

    Writes nothing anywhere (cluster or database); unchanged objects are left out.
    """
    cluster = Cluster.objects.get(pk=cluster_id)
    plan = cluster_plan(cluster)
    if changes:
        plan = plan_with_changes(plan, changes)
    managed = _last_applied(cluster_id)
    own_client = client is None
    client = client or client_for_cluster(cluster, timeout=settings.KUBE_REQUEST_TIMEOUT)
    try:
        syncer = ClusterSyncer(
            plan=plan,
            mode=Cluster.SyncMode.ENFORCE,  # show what enforcing would do, whatever the mode
            client=client,
            managed=managed,
            dry_run=True,
            concurrency=settings.SYNC_CONCURRENCY,
        )
        return [o for o in syncer.run() if o.action != Action.UNCHANGED]
    finally:
        if own_client:
            client.close()
