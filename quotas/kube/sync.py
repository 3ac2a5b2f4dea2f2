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
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from quotas.kube.client import KINDS, KubeClient, KubeConflict, KubeError, client_for_cluster
from quotas.kube.diff import differences, live_view, merged_for_write, owned
from quotas.kube.plan import AllocationChange, ClusterPlan, cluster_plan, plan_with_changes
from quotas.kube.render import (
    CLUSTER_LABEL,
    GENERATION_ANNOTATION,
    MANAGED_BY_LABEL,
    object_key,
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
Action = SyncObjectResult.Action
Key = tuple[str, str, str, str]


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


# --- one object ---------------------------------------------------------------------------


@dataclass
class Outcome:
    key: Key
    action: str
    diff: list = field(default_factory=list)
    error: str = ""
    transient: bool = False
    applied: dict | None = None  # owned view now in the cluster (for ManagedObject)
    drift: list = field(default_factory=list)
    drift_restored: bool = False


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


class ClusterSyncer:
    """Compares and writes the objects of one plan; no database writes happen in here."""

    def __init__(
        self,
        *,
        plan: ClusterPlan,
        mode: str,
        client: KubeClient,
        managed: dict[Key, dict],
        renew=lambda: None,
        dry_run: bool = False,
    ):
        self.plan = plan
        self.mode = mode
        self.client = client
        self.managed = managed
        self.renew = renew
        self.dry_run = dry_run
        self.writes = 0

    def live_objects(self) -> dict[Key, dict]:
        selector = f"{MANAGED_BY_LABEL}={self.plan.managed_by},{CLUSTER_LABEL}={self.plan.name}"
        live: dict[Key, dict] = {}
        for api_version, kind in KINDS:
            if kind == "Pod":
                continue
            try:
                items = self.client.list(api_version, kind, label_selector=selector)
            except KubeError as exc:
                if exc.status == 404:  # the scheduler's CRD is not installed here
                    continue
                raise
            for item in items:
                live[object_key(item)] = item
        return live

    def run(self) -> list[Outcome]:
        desired = render_cluster(self.plan)
        shadow_keys: set[Key] = set()
        for ns in self.plan.namespaces:
            if ns.shadow:
                shadow_keys |= {object_key(o) for o in render_namespace_objects(self.plan, ns)}
        live = self.live_objects()
        outcomes: list[Outcome] = []
        failed_namespaces: set[str] = set()
        renew_every = settings.SYNC_LEASE_SECONDS * RENEW_AFTER_SHARE
        renew_at = time.monotonic() + renew_every
        for obj in desired:
            if time.monotonic() >= renew_at:
                self.renew()
                renew_at = time.monotonic() + renew_every
            key = object_key(obj)
            namespace = key[2]
            if namespace and namespace in failed_namespaces:
                outcomes.append(
                    Outcome(
                        key,
                        Action.ERROR,
                        error=f"namespace {namespace} not written yet",
                        transient=True,
                    )
                )
                continue
            outcome = self.sync_object(obj, live.get(key), shadow=key in shadow_keys)
            if outcome.action == Action.ERROR and key[1] == "Namespace":
                failed_namespaces.add(key[3])
            outcomes.append(outcome)
        wanted = {object_key(o) for o in desired}
        for key, obj in sorted(live.items(), reverse=True):  # namespaced objects before others
            if key not in wanted:
                outcomes.append(self.prune(key, obj))
        return outcomes

    def sync_object(self, obj: dict, live: dict | None, *, shadow: bool) -> Outcome:
        key = object_key(obj)
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
                # Created or changed since we read it: read again and decide again.
                try:
                    live = self.client.get(*key)
                except KubeError as exc:
                    return Outcome(key, Action.ERROR, error=str(exc), transient=exc.transient)
            except KubeError as exc:
                return Outcome(key, Action.ERROR, error=str(exc), transient=exc.transient)
        return Outcome(key, Action.ERROR, error="kept conflicting; retried later", transient=True)

    def _decide(
        self,
        key: Key,
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
        changes = (
            differences(live_view(live, desired_view), desired_view)
            if live is not None
            else differences({}, desired_view)
        )
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
        key: Key,
        obj: dict,
        desired_view: dict,
        live: dict | None,
        changes: list,
        drift: list,
    ) -> Outcome:
        body = _with_generation(obj, self.plan.generation)
        if live is None:
            result = self.client.create(body, dry_run=self.dry_run)
        else:
            merged = merged_for_write(live, body)
            merged["metadata"]["resourceVersion"] = live["metadata"].get("resourceVersion")
            result = self.client.replace(merged, dry_run=self.dry_run)
        if self.dry_run:
            # What the API server says the object would become.
            before = live_view(live, desired_view) if live is not None else {}
            changes = differences(before, live_view(result or {}, desired_view))
            return Outcome(
                key, Action.UPDATED if live else Action.CREATED, diff=changes, drift=drift
            )
        self.writes += 1
        if drift:
            action = Action.DRIFT_RESTORED
        elif live is None:
            action = Action.CREATED
        else:
            action = Action.UPDATED
        return Outcome(
            key, action, diff=changes, applied=desired_view, drift=drift, drift_restored=bool(drift)
        )

    def prune(self, key: Key, live: dict) -> Outcome:
        if key[1] == "Namespace":
            # Deleting a namespace deletes every workload in it: never done automatically.
            return Outcome(key, Action.ORPHANED)
        if self.mode == Cluster.SyncMode.SHADOW:
            return Outcome(key, Action.SHADOW, diff=[{"path": "", "old": "present", "new": None}])
        if _generation_of(live) > self.plan.generation:
            return Outcome(key, Action.FENCED)
        try:
            self.client.delete(*key, dry_run=self.dry_run)
        except KubeError as exc:
            if exc.status == 404:
                return Outcome(key, Action.DELETED)
            return Outcome(key, Action.ERROR, error=str(exc), transient=exc.transient)
        self.writes += 1
        return Outcome(key, Action.DELETED)


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
            cluster = Cluster.objects.get(pk=cluster_id)
            plan = cluster_plan(cluster)
            request_ids = list(
                SyncRequest.objects.filter(
                    cluster_id=cluster_id,
                    status__in=[SyncRequest.Status.PENDING, SyncRequest.Status.FAILED],
                    generation__lte=plan.generation,
                ).values_list("id", flat=True)
            )
            run = SyncRun.objects.create(
                cluster=cluster,
                trigger=trigger,
                mode=cluster.sync_mode,
                generation=plan.generation,
                worker=worker,
            )
        managed = {
            (m.api_version, m.kind, m.namespace, m.name): m.applied
            for m in ManagedObject.objects.filter(cluster_id=cluster_id)
        }
        outcomes, error, transient = _run_syncer(
            cluster=cluster,
            plan=plan,
            managed=managed,
            client=client,
            renew=lambda: lease_renew(cluster_id, holder, epoch),
        )
        _record(run, cluster_id, plan, outcomes, error, request_ids, started)
        if (error or any(o.action == Action.ERROR for o in outcomes)) and transient:
            raise TransientSyncError(error or run.error)
        return run
    finally:
        lease_release(cluster_id, holder, epoch)


def _run_syncer(*, cluster, plan, managed, client, renew) -> tuple[list[Outcome], str, bool]:
    """Run the comparison and writes; returns (outcomes, error of the whole run, transient)."""
    own_client = client is None
    try:
        if own_client:
            client = client_for_cluster(cluster, timeout=settings.KUBE_REQUEST_TIMEOUT)
        syncer = ClusterSyncer(
            plan=plan, mode=cluster.sync_mode, client=client, managed=managed, renew=renew
        )
        outcomes = syncer.run()
    except LeaseLost as exc:
        return [], str(exc), True
    except KubeError as exc:
        return [], str(exc), exc.transient
    except Exception as exc:
        # A broken kubeconfig, a bug: recorded as a failed run instead of a run stuck "running".
        log.exception("sync of cluster %s failed", cluster.name)
        return [], f"{type(exc).__name__}: {exc}"[:2000], False
    finally:
        if own_client and client is not None:
            client.close()
    return outcomes, "", any(o.transient for o in outcomes)


def _key_fields(key: Key) -> dict[str, str]:
    """An object key as the fields of the rows that describe objects."""
    return dict(zip(("api_version", "kind", "namespace", "name"), key, strict=True))


def _record(run, cluster_id, plan, outcomes, error, request_ids, started) -> None:
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.action] = counts.get(o.action, 0) + 1
    failures = [o for o in outcomes if o.action == Action.ERROR]
    if failures and not error:
        error = "; ".join(f"{o.key[1]} {o.key[2]}/{o.key[3]}: {o.error}" for o in failures[:5])
        if len(failures) > 5:
            error += f"; and {len(failures) - 5} more"
    now = timezone.now()
    with transaction.atomic():
        SyncObjectResult.objects.bulk_create(
            [
                SyncObjectResult(
                    run=run,
                    **_key_fields(o.key),
                    action=o.action,
                    diff=o.diff,
                    error=o.error,
                )
                for o in outcomes
                # Periodic drift checks store only what they found; a sync of a change records
                # every object, unchanged ones included.
                if o.action != Action.UNCHANGED or run.trigger != SyncRun.Trigger.RECONCILE
            ],
            batch_size=500,
        )
        written = [o for o in outcomes if o.applied is not None]
        if written:
            existing = {
                (m.api_version, m.kind, m.namespace, m.name): m
                for m in ManagedObject.objects.filter(cluster_id=cluster_id)
            }
            to_create, to_update = [], []
            for o in written:
                row = existing.get(o.key)
                if row is None:
                    to_create.append(
                        ManagedObject(
                            cluster_id=cluster_id,
                            **_key_fields(o.key),
                            applied=o.applied,
                            generation=plan.generation,
                        )
                    )
                elif row.applied != o.applied:
                    row.applied, row.generation = o.applied, plan.generation
                    to_update.append(row)
            ManagedObject.objects.bulk_create(to_create, batch_size=500, ignore_conflicts=True)
            ManagedObject.objects.bulk_update(to_update, ["applied", "generation"], batch_size=500)
        deleted = [o.key for o in outcomes if o.action == Action.DELETED]
        for key in deleted:
            ManagedObject.objects.filter(cluster_id=cluster_id, **_key_fields(key)).delete()
        DriftEvent.objects.bulk_create(
            [
                DriftEvent(
                    cluster_id=cluster_id,
                    run=run,
                    **_key_fields(o.key),
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
        run.save()
        transaction.on_commit(
            lambda: sync_finished.send(sender=SyncRun, run_id=run.id, request_ids=request_ids)
        )
        requests = SyncRequest.objects.filter(id__in=request_ids)
        if ok:
            requests.update(status=SyncRequest.Status.DONE, completed_at=now, sync_run=run)
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
    managed = {
        (m.api_version, m.kind, m.namespace, m.name): m.applied
        for m in ManagedObject.objects.filter(cluster_id=cluster_id)
    }
    own_client = client is None
    client = client or client_for_cluster(cluster, timeout=settings.KUBE_REQUEST_TIMEOUT)
    try:
        syncer = ClusterSyncer(
            plan=plan,
            mode=Cluster.SyncMode.ENFORCE,  # show what enforcing would do, whatever the mode
            client=client,
            managed=managed,
            dry_run=True,
        )
        return [o for o in syncer.run() if o.action != Action.UNCHANGED]
    finally:
        if own_client:
            client.close()
