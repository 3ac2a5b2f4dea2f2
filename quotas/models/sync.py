"""Pushing allocations to clusters: the outbox of pending syncs, runs and their per-object
results, the objects the portal manages, drift found on them, and the per-cluster lease."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class SyncRequest(models.Model):
    """Outbox row: written in the same transaction as the change that needs a sync."""

    class Status(models.TextChoices):
        PENDING = "pending", _("pending")
        DONE = "done", _("done")
        FAILED = "failed", _("failed (retried by the reconciler)")

    cluster = models.ForeignKey(
        "quotas.Cluster", on_delete=models.CASCADE, related_name="+", verbose_name=_("cluster")
    )
    created_at = models.DateTimeField(
        auto_now_add=True, db_index=True, verbose_name=_("created at")
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("requested by"),
    )
    reason = models.CharField(max_length=500, blank=True, verbose_name=_("reason"))
    # Plan generation the change produced; done once a sync has written at least this one.
    generation = models.PositiveBigIntegerField(default=0, verbose_name=_("generation"))
    # Team namespaces whose allocations the change set (a sync after it need plan only them
    # and the cluster-wide objects they feed); null: anything may have changed.
    namespaces = models.JSONField(null=True, blank=True, verbose_name=_("namespaces"))
    status = models.CharField(
        max_length=8, choices=Status.choices, default=Status.PENDING, verbose_name=_("status")
    )
    attempts = models.PositiveIntegerField(default=0, verbose_name=_("attempts"))
    last_error = models.TextField(blank=True, verbose_name=_("last error"))
    completed_at = models.DateTimeField(null=True, blank=True, verbose_name=_("completed at"))
    sync_run = models.ForeignKey(
        "quotas.SyncRun",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="requests",
        verbose_name=_("sync run"),
    )

    class Meta:
        verbose_name = _("sync request")
        verbose_name_plural = _("sync requests")
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "cluster"], name="syncrequest_status_cluster")]

    def __str__(self) -> str:
        return f"sync {self.cluster_id} gen {self.generation} ({self.status})"


class SyncRun(models.Model):
    """One pass over a cluster: what was compared, written, pruned, and how it ended."""

    class Status(models.TextChoices):
        RUNNING = "running", _("running")
        SUCCEEDED = "succeeded", _("succeeded")
        FAILED = "failed", _("failed")
        SKIPPED = "skipped", _("skipped (another sync holds the cluster)")

    class Trigger(models.TextChoices):
        CHANGE = "change", _("approved change")
        RECONCILE = "reconcile", _("periodic reconcile")
        MANUAL = "manual", _("manual")
        PREVIEW = "preview", _("preview (dry run)")

    cluster = models.ForeignKey(
        "quotas.Cluster",
        on_delete=models.CASCADE,
        related_name="sync_runs",
        verbose_name=_("cluster"),
    )
    trigger = models.CharField(max_length=10, choices=Trigger.choices, verbose_name=_("trigger"))
    mode = models.CharField(max_length=12, verbose_name=_("mode"))
    generation = models.PositiveBigIntegerField(default=0, verbose_name=_("generation"))
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.RUNNING, verbose_name=_("status")
    )
    started_at = models.DateTimeField(
        auto_now_add=True, db_index=True, verbose_name=_("started at")
    )
    finished_at = models.DateTimeField(null=True, blank=True, verbose_name=_("finished at"))
    duration_ms = models.PositiveIntegerField(null=True, blank=True, verbose_name=_("duration ms"))
    objects_total = models.PositiveIntegerField(default=0, verbose_name=_("objects total"))
    # Count per action (created, updated, deleted, unchanged, drift, shadow, fenced, error).
    counts = models.JSONField(default=dict, blank=True, verbose_name=_("counts"))
    error = models.TextField(blank=True, verbose_name=_("error"))
    worker = models.CharField(max_length=255, blank=True, verbose_name=_("worker"))
    # Found by discovery before writing: [{"backend", "api_version", "message"}], e.g. Kueue
    # enabled for the cluster but its v1beta2 API not served.
    backend_problems = models.JSONField(
        default=list, blank=True, verbose_name=_("backend problems")
    )

    class Meta:
        verbose_name = _("sync run")
        verbose_name_plural = _("sync runs")
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"{self.cluster} {self.trigger} {self.status} @ {self.started_at:%Y-%m-%d %H:%M:%S}"


class SyncObjectResult(models.Model):
    """What a run did to one object: rows only for objects written, pruned, drifted, fenced,
    shadowed or failed; unchanged ones are only counted in SyncRun.counts."""

    class Action(models.TextChoices):
        CREATED = "created", _("created")
        UPDATED = "updated", _("updated")
        DELETED = "deleted", _("deleted (pruned)")
        UNCHANGED = "unchanged", _("unchanged")
        DRIFT_RESTORED = "drift_restored", _("drift restored")
        DRIFT_REPORTED = "drift_reported", _("drift reported (not restored)")
        SHADOW = "shadow", _("would change (shadow mode)")
        FENCED = "fenced", _("skipped: a newer sync wrote it")
        ORPHANED = "orphaned", _("no longer wanted, kept (namespaces are never deleted)")
        ERROR = "error", _("error")

    run = models.ForeignKey(
        SyncRun, on_delete=models.CASCADE, related_name="results", verbose_name=_("run")
    )
    api_version = models.CharField(max_length=100, verbose_name=_("api version"))
    kind = models.CharField(max_length=100, verbose_name=_("kind"))
    namespace = models.CharField(max_length=63, blank=True, verbose_name=_("namespace"))
    name = models.CharField(max_length=253, verbose_name=_("name"))
    action = models.CharField(max_length=16, choices=Action.choices, verbose_name=_("action"))
    diff = models.JSONField(default=list, blank=True, verbose_name=_("diff"))
    error = models.TextField(blank=True, verbose_name=_("error"))

    class Meta:
        verbose_name = _("sync object result")
        verbose_name_plural = _("sync object results")
        ordering = ["run", "id"]

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}: {self.action}"


class ManagedObject(models.Model):
    """The fields the portal last wrote to one object; a live value that differs is drift."""

    cluster = models.ForeignKey(
        "quotas.Cluster", on_delete=models.CASCADE, related_name="+", verbose_name=_("cluster")
    )
    api_version = models.CharField(max_length=100, verbose_name=_("api version"))
    kind = models.CharField(max_length=100, verbose_name=_("kind"))
    namespace = models.CharField(max_length=63, blank=True, verbose_name=_("namespace"))
    name = models.CharField(max_length=253, verbose_name=_("name"))
    applied = models.JSONField(default=dict, verbose_name=_("applied"))
    generation = models.PositiveBigIntegerField(default=0, verbose_name=_("generation"))
    applied_at = models.DateTimeField(auto_now=True, verbose_name=_("applied at"))

    class Meta:
        verbose_name = _("managed object")
        verbose_name_plural = _("managed objects")
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "api_version", "kind", "namespace", "name"],
                name="managedobject_unique_key",
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


class DriftEvent(models.Model):
    """An object found changed in the cluster by someone other than the portal."""

    cluster = models.ForeignKey(
        "quotas.Cluster", on_delete=models.CASCADE, related_name="drifts", verbose_name=_("cluster")
    )
    run = models.ForeignKey(
        SyncRun, on_delete=models.SET_NULL, null=True, related_name="drifts", verbose_name=_("run")
    )
    detected_at = models.DateTimeField(
        auto_now_add=True, db_index=True, verbose_name=_("detected at")
    )
    api_version = models.CharField(max_length=100, verbose_name=_("api version"))
    kind = models.CharField(max_length=100, verbose_name=_("kind"))
    namespace = models.CharField(max_length=63, blank=True, verbose_name=_("namespace"))
    name = models.CharField(max_length=253, verbose_name=_("name"))
    # [{"path": "spec.hard.requests.nvidia.com/gpu", "old": "10", "new": "20"}]; old is what
    # the portal wrote, new what the cluster had.
    changes = models.JSONField(default=list, verbose_name=_("changes"))
    restored = models.BooleanField(default=False, verbose_name=_("restored"))

    class Meta:
        verbose_name = _("drift event")
        verbose_name_plural = _("drift events")
        ordering = ["-detected_at"]

    def __str__(self) -> str:
        return f"drift {self.kind} {self.namespace}/{self.name} @ {self.detected_at:%Y-%m-%d %H:%M}"


class SyncLease(models.Model):
    """Who may write to a cluster now; expires so a dead worker never blocks it for long."""

    cluster = models.OneToOneField(
        "quotas.Cluster", on_delete=models.CASCADE, related_name="+", verbose_name=_("cluster")
    )
    holder = models.CharField(max_length=255, blank=True, verbose_name=_("holder"))
    expires_at = models.DateTimeField(null=True, blank=True, verbose_name=_("expires at"))
    # Incremented on every acquisition: a fencing token for the holder.
    epoch = models.PositiveBigIntegerField(default=0, verbose_name=_("epoch"))

    class Meta:
        verbose_name = _("sync lease")
        verbose_name_plural = _("sync leases")

    def __str__(self) -> str:
        return f"lease {self.cluster_id} by {self.holder or '-'}"
