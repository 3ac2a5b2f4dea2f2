"""REST semantics of the sandbox, independent of HTTP: create, get, list, replace, patch
(merge, strategic, JSON, server-side apply), delete, with validation, optimistic concurrency,
dry-run and managed fields, as kube-apiserver does them for the portal's kinds.
"""

from __future__ import annotations

import base64
import copy
import json
import secrets
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import yaml

from kubesandbox import apply as ssa
from kubesandbox import errors, kueue
from kubesandbox.admission_policies import AdmissionPolicies, AdmissionRequest
from kubesandbox.celrules import UnevaluatedRule, check_crd_rules
from kubesandbox.core_validation import (
    SYSTEM_PRIORITY_CLASSES,
    apply_defaults,
    resized_pod,
    validate_builtin,
    validate_pod_resize,
)
from kubesandbox.discovery import Discovery, Resource
from kubesandbox.faults import Stats
from kubesandbox.merge import PatchError, json_patch, merge_patch, strategic_merge_patch
from kubesandbox.schemas import FieldError, strip_nulls, validate_object
from kubesandbox.selectors import field_selector, label_selector
from kubesandbox.store import Store
from kubesandbox.volcano import QueueWebhook

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
PROTECTED_NAMESPACES = ("default", "kube-system", "kube-public")
APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
_SERVER_META = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
)
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

try:
    _YamlLoader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - libyaml missing
    _YamlLoader = yaml.SafeLoader


@dataclass
class ApiRequest:
    method: str
    resource: Resource
    namespace: str | None
    name: str | None
    subresource: str | None
    query: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    content_type: str = ""
    user_agent: str = ""
    # Warnings of the admission chain, answered as ``Warning`` headers.
    warnings: list[str] = field(default_factory=list)


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _status_success(resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata", {})
    details: dict[str, Any] = {
        "name": meta.get("name", ""),
        "kind": resource.info.plural,
        "uid": meta.get("uid", ""),
    }
    if resource.info.group:
        details["group"] = resource.info.group
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }


def _without(obj: dict[str, Any], meta_keys: tuple[str, ...]) -> dict[str, Any]:
    out = dict(obj)
    out["metadata"] = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in meta_keys}
    return out


def _spec_part(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


class Api:
    """The object API over a :class:`Store`; every call is atomic under the store lock."""

    def __init__(
        self,
        store: Store,
        stats: Stats,
        discovery: Discovery | None = None,
        *,
        namespace_finalize_seconds: float = 0.0,
    ) -> None:
        self.store = store
        self.stats = stats
        self.discovery = discovery or Discovery.get()
        self.namespaces = self.discovery.by_kind[("v1", "Namespace")]
        # Seconds a deleted namespace stays Terminating before its objects and itself go away;
        # 0 finishes within the DELETE (the answer still shows it Terminating).
        self.namespace_finalize_seconds = namespace_finalize_seconds
        self._finalizers: dict[str, threading.Timer] = {}
        self.queue_webhook = QueueWebhook(self._queues)
        self.admission_policies = AdmissionPolicies(store, self.discovery)

    def _queues(self) -> list[dict[str, Any]]:
        return self.store.values(("scheduling.volcano.sh", "queues"))

    # -- helpers -------------------------------------------------------------------------

    def _keeps_status(self, resource: Resource) -> bool:
        """Whether writes to the main resource leave ``status`` alone (status subresource).

        Pods are the sandbox's exception: tests create pods with their status set.
        """
        return "status" in resource.info.subresources and resource.info.kind != "Pod"

    def _out(self, resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        """The stored object as seen through the requested version (CRD conversion "None")."""
        if obj.get("apiVersion") == resource.info.api_version:
            return obj
        return {**obj, "apiVersion": resource.info.api_version}

    def _parse(self, req: ApiRequest, *, allow_yaml: bool = True) -> dict[str, Any]:
        ctype = req.content_type.split(";")[0].strip().lower()
        try:
            if ctype in ("", "application/json", "*/*") or ctype.endswith("+json"):
                data = json.loads(req.body or b"null")
            elif allow_yaml and ctype in (
                "application/yaml",
                "application/apply-patch+yaml",
                "text/yaml",
            ):
                data = yaml.load(req.body or b"", Loader=_YamlLoader)  # noqa: S506 - safe loader
            else:
                raise errors.unsupported_media_type(ctype)
        except (ValueError, yaml.YAMLError) as exc:
            raise errors.bad_request(f"error decoding request body: {exc}") from exc
        if not isinstance(data, dict):
            raise errors.bad_request("the body of the request must be a JSON or YAML object")
        return strip_nulls(data)

    def _check_type(self, req: ApiRequest, obj: dict[str, Any], *, require: bool = False) -> None:
        info = req.resource.info
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if require and (not api_version or not kind):
            missing = "apiVersion" if not api_version else "kind"
            raise errors.bad_request(f"{missing} must be set in the applied configuration")
        if not api_version:
            obj["apiVersion"] = info.api_version
        elif api_version != info.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected "
                f"API version ({info.api_version})"
            )
        if not kind:
            obj["kind"] = info.kind
        elif kind != info.kind:
            raise errors.bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({info.kind})"
            )
        meta = obj.get("metadata")
        if meta is None:
            obj["metadata"] = {}
        elif not isinstance(meta, dict):
            raise errors.invalid(
                info.kind,
                "",
                [FieldError("metadata", "Invalid value: must be of type object")],
                info.group,
            )

    def _check_identity(self, req: ApiRequest, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        info = req.resource.info
        if req.name is not None and meta.get("name") not in (None, "", req.name):
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the "
                f"URL ({req.name})"
            )
        if req.name is not None and not meta.get("name"):
            meta["name"] = req.name
        if info.namespaced:
            namespace = meta.get("namespace")
            if namespace and req.namespace and namespace != req.namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            if req.namespace:
                meta["namespace"] = req.namespace
        else:
            meta.pop("namespace", None)

    def _validate(
        self, resource: Resource, obj: dict[str, Any], old: dict[str, Any] | None = None
    ) -> None:
        """Schema, then the API server's own rules or the CRD's CEL rules: 400 or 422."""
        problems = validate_object(obj)
        info = resource.info
        if not problems:
            api_version = info.api_version
            old_view = None if old is None else {**old, "apiVersion": api_version}
            if info.is_crd:
                try:
                    problems = check_crd_rules(api_version, info.kind, obj, old_view)
                except UnevaluatedRule as exc:
                    # Never pass an object a rule could not judge.
                    raise errors.internal(str(exc)) from exc
            else:
                problems = validate_builtin(api_version, info.kind, obj, old_view)
        if not problems:
            return
        name = obj.get("metadata", {}).get("name") or obj.get("metadata", {}).get(
            "generateName", ""
        )
        unknown = [p for p in problems if p.message.startswith("unknown field")]
        if unknown and len(unknown) == len(problems):
            # kube-apiserver rejects unknown fields while decoding (fieldValidation=Strict): 400.
            listed = ", ".join(p.message for p in unknown)
            raise errors.ApiError(
                400,
                "BadRequest",
                f'{info.kind} in version "{info.version}" cannot be handled as a {info.kind}: '
                f"strict decoding error: {listed}",
                {
                    "causes": [
                        {"reason": "FieldValueUnknown", "message": p.message, "field": p.field}
                        for p in unknown
                    ]
                },
            )
        raise errors.invalid(info.kind, name, problems, info.group)

    def _require_namespace(self, resource: Resource, namespace: str | None, name: str = "") -> None:
        """NamespaceLifecycle on create: the namespace must exist and not be terminating."""
        if not resource.info.namespaced:
            return
        if not namespace:
            raise errors.bad_request("the namespace of the object must be set")
        found = self.store.get(self.namespaces.key, "", namespace)
        if found is None:
            raise errors.not_found("namespaces", namespace)
        if (found.get("status") or {}).get("phase") == "Terminating":
            info = resource.info
            raise errors.namespace_terminating(info.plural, name, namespace, info.group)

    def _admit(
        self,
        resource: Resource,
        obj: dict[str, Any] | None,
        old: dict[str, Any] | None,
        *,
        req: ApiRequest | None,
        dry_run: bool,
    ) -> None:
        """Validating admission, in kube-apiserver's order: ValidatingAdmissionPolicies, then
        the cluster's validating webhooks (Volcano's queue webhook)."""
        operation = "CREATE" if old is None else "DELETE" if obj is None else "UPDATE"
        meta = ((obj if obj is not None else old) or {}).get("metadata") or {}
        namespace = meta.get("namespace", "") if resource.info.namespaced else ""
        if resource.info.kind == "Namespace" and not resource.info.group:
            namespace = meta.get("name", "")
        subresource = (req.subresource if req is not None else None) or ""
        self.admission_policies.admit(
            AdmissionRequest(
                operation=operation,
                resource=resource,
                subresource=subresource,
                namespace=namespace,
                name=meta.get("name", ""),
                obj=obj,
                old=old,
                dry_run=dry_run,
                field_manager=req.query.get("fieldManager", "") if req is not None else "",
            ),
            req.warnings if req is not None else [],
        )
        if subresource:
            return
        if resource.key == ("scheduling.volcano.sh", "queues"):
            if obj is None:
                self.queue_webhook.admit_delete(meta.get("name", ""))
            else:
                self.queue_webhook.admit(obj, old)
        elif (
            obj is not None and resource.key[0] == kueue.GROUP and resource.key[1] in kueue.WEBHOOKS
        ):
            kueue.admit(resource.info.plural, obj)

    def _admit_priority(self, resource: Resource, obj: dict[str, Any]) -> None:
        """The Priority admission plugin on a new pod: its priorityClassName (else the global
        default class, if any) must name a PriorityClass, whose value and preemption policy
        the pod gets; a pod may not state others."""
        if resource.info.kind != "Pod" or resource.info.group:
            return
        spec = obj.setdefault("spec", {})
        pod = obj["metadata"].get("name", "")
        name = spec.get("priorityClassName") or ""
        classes = ("scheduling.k8s.io", "priorityclasses")
        if name:
            found = self.store.get(classes, "", name)
            if found is None and name in SYSTEM_PRIORITY_CLASSES:
                found = {"value": SYSTEM_PRIORITY_CLASSES[name]}
            if found is None:
                raise _pod_forbidden(pod, f"no PriorityClass with name {name} was found")
        else:
            # The global default with the lowest value, if any, else priority 0.
            defaults = [c for c in self.store.values(classes) if c.get("globalDefault")]
            found = min(defaults, key=lambda c: c.get("value", 0), default={"value": 0})
            if defaults:
                spec["priorityClassName"] = found["metadata"]["name"]
        value = found.get("value", 0)
        policy = found.get("preemptionPolicy", "PreemptLowerPriority")
        for key, what, computed in (
            ("priority", "integer value of priority", value),
            ("preemptionPolicy", "string value of PreemptionPolicy", policy),
        ):
            stated = spec.get(key)
            if stated is not None and stated != computed:
                raise _pod_forbidden(
                    pod,
                    f"the {what} ({stated}) must not be provided in pod spec; priority "
                    f"admission controller computed {computed} from the given PriorityClass name",
                )
            spec[key] = computed

    def _manager(self, req: ApiRequest) -> str:
        manager = req.query.get("fieldManager", "")
        if not manager:
            manager = req.user_agent.split("/", 1)[0][:128] or "unknown"
        if len(manager) > 128:
            raise errors.ApiError(
                422,
                "Invalid",
                "fieldManager: Too long: must have at most 128 bytes",
                {"causes": []},
            )
        return manager

    def _dry_run(self, req: ApiRequest) -> bool:
        value = req.query.get("dryRun")
        if value is None:
            return False
        if value != "All":
            raise errors.bad_request(f'Invalid dry run value: "{value}": supported values: "All"')
        return True

    def _persist(self, resource: Resource, obj: dict[str, Any], *, count: bool = True) -> None:
        meta = obj["metadata"]
        self.store.put(resource.key, meta.get("namespace", ""), meta["name"], obj)
        if count:
            self.stats.count_write(resource.info.kind, obj, "WRITE")

    def _defaults(self, resource: Resource, obj: dict[str, Any]) -> None:
        """Defaults kube-apiserver fills in for the kinds the portal writes."""
        apply_defaults(resource.info.api_version, resource.info.kind, obj)
        if resource.info.kind == "Namespace":
            name = obj["metadata"].get("name")
            if name:
                obj["metadata"].setdefault("labels", {})
                obj["metadata"]["labels"] = {
                    **obj["metadata"]["labels"],
                    "kubernetes.io/metadata.name": name,
                }
            obj["spec"] = {"finalizers": ["kubernetes"], **(obj.get("spec") or {})}

    # -- read ----------------------------------------------------------------------------

    def get(self, req: ApiRequest) -> dict[str, Any]:
        with self.store.lock:
            obj = self.store.get(req.resource.key, req.namespace or "", req.name or "")
        if obj is None:
            raise errors.not_found(
                req.resource.info.plural, req.name or "", req.resource.info.group
            )
        return self._out(req.resource, obj)

    def list(self, req: ApiRequest) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """(list metadata, items) of a LIST request."""
        resource = req.resource
        labels = label_selector(req.query.get("labelSelector"))
        fields = field_selector(req.query.get("fieldSelector"), resource.info.kind)
        limit = int(req.query.get("limit") or 0)
        start_after: tuple[str, str] | None = None
        token = req.query.get("continue")
        if token:
            try:
                decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
                start_after = (decoded["ns"], decoded["name"])
            except (ValueError, KeyError, TypeError) as exc:
                raise errors.ApiError(
                    410, "Expired", "the provided continue parameter is too old or invalid"
                ) from exc
        with self.store.lock:
            rows = self.store.items(resource.key, req.namespace)
            resource_version = str(self.store.resource_version)
        items = []
        remaining = 0
        last_key: tuple[str, str] | None = None
        for key, obj in rows:
            if start_after is not None and key <= start_after:
                continue
            if labels and not labels(obj):
                continue
            if fields and not fields(obj):
                continue
            if limit and len(items) >= limit:
                remaining += 1
                continue
            items.append(self._out(resource, obj))
            last_key = key
        meta: dict[str, Any] = {"resourceVersion": resource_version}
        if remaining and last_key is not None:
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps({"ns": last_key[0], "name": last_key[1]}).encode()
            ).decode()
            meta["remainingItemCount"] = remaining
        return meta, items

    def list_object(self, req: ApiRequest) -> dict[str, Any]:
        meta, items = self.list(req)
        info = req.resource.info
        if not info.is_crd:
            # kube-apiserver omits apiVersion/kind on the items of built-in lists.
            items = [
                {k: v for k, v in item.items() if k not in ("apiVersion", "kind")} for item in items
            ]
        return {
            "apiVersion": info.api_version,
            "kind": info.kind + "List",
            "metadata": meta,
            "items": items,
        }

    # -- create --------------------------------------------------------------------------

    def create(self, req: ApiRequest) -> dict[str, Any]:
        resource = req.resource
        if req.subresource:
            raise errors.method_not_allowed()
        obj = self._parse(req)
        self._check_type(req, obj)
        self._check_identity(req, obj)
        dry_run = self._dry_run(req)
        manager = self._manager(req)
        meta = obj["metadata"]
        if meta.get("resourceVersion"):
            raise errors.internal("resourceVersion should not be set on objects to be created")
        with self.store.lock:
            created = self._new_object(
                resource, obj, manager=manager, operation="Update", dry_run=dry_run, req=req
            )
        return self._out(resource, created)

    def _new_object(
        self,
        resource: Resource,
        obj: dict[str, Any],
        *,
        manager: str,
        operation: str,
        dry_run: bool,
        applied: dict[str, Any] | None = None,
        count: bool = True,
        req: ApiRequest | None = None,
    ) -> dict[str, Any]:
        """Fill in server fields, validate, admit and (unless dry-run) store a new object."""
        meta = obj["metadata"]
        for key in (*_SERVER_META, "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(key, None)
        if not meta.get("name") and meta.get("generateName"):
            suffix = "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))
            meta["name"] = f"{meta['generateName']}{suffix}"
        if self._keeps_status(resource):
            obj.pop("status", None)
        if resource.info.kind == "Namespace":
            obj["status"] = {"phase": "Active"}
        self._defaults(resource, obj)
        self._require_namespace(resource, meta.get("namespace"), meta.get("name") or "")
        self._admit_priority(resource, obj)
        self._validate(resource, obj)
        self._admit(resource, obj, None, req=req, dry_run=dry_run)
        if self.store.get(resource.key, meta.get("namespace", ""), meta["name"]) is not None:
            raise errors.already_exists(resource.info.plural, meta["name"], resource.info.group)
        now = now_rfc3339()
        drop_status = self._keeps_status(resource)
        if operation == "Apply" and applied is not None:
            entries = [
                ssa.ManagedEntry(
                    manager,
                    "Apply",
                    resource.info.api_version,
                    now,
                    ssa.leaf_paths(ssa.managed_view(applied, drop_status=drop_status)),
                )
            ]
        else:
            entries = ssa.record_update(
                None,
                obj,
                [],
                manager=manager,
                api_version=resource.info.api_version,
                now=now,
                drop_status=drop_status,
            )
        stored = {"apiVersion": obj["apiVersion"], "kind": obj["kind"]}
        meta.update(
            {
                "uid": str(uuid.uuid4()),
                "creationTimestamp": now,
                "generation": 1,
            }
        )
        if entries:
            meta["managedFields"] = [e.to_json() for e in entries]
        if not dry_run:
            meta["resourceVersion"] = self.store.next_resource_version()
        stored.update({k: v for k, v in obj.items() if k not in stored})
        stored["metadata"] = _order_meta(meta)
        if not dry_run:
            self._persist(resource, stored, count=count)
        return stored

    # -- update (PUT, patches, apply) ----------------------------------------------------

    def replace(self, req: ApiRequest) -> dict[str, Any]:
        if req.subresource not in (None, "status", "resize"):
            raise errors.not_found(
                req.resource.info.plural, req.name or "", req.resource.info.group
            )
        obj = self._parse(req)
        self._check_type(req, obj)
        self._check_identity(req, obj)
        dry_run = self._dry_run(req)
        manager = self._manager(req)
        with self.store.lock:
            old = self._existing(req)
            wanted = obj["metadata"].get("resourceVersion")
            if wanted and wanted != old["metadata"].get("resourceVersion"):
                raise errors.conflict(
                    req.resource.info.plural, req.name or "", req.resource.info.group
                )
            _, result = self._update(req, old, obj, manager=manager, dry_run=dry_run)
        return self._out(req.resource, result)

    def _existing(self, req: ApiRequest) -> dict[str, Any]:
        old = self.store.get(req.resource.key, req.namespace or "", req.name or "")
        if old is None:
            raise errors.not_found(
                req.resource.info.plural, req.name or "", req.resource.info.group
            )
        return old

    def _merge_server_fields(
        self, req: ApiRequest, old: dict[str, Any], incoming: dict[str, Any]
    ) -> dict[str, Any]:
        """The object a write of ``incoming`` over ``old`` would store (before bookkeeping)."""
        resource = req.resource
        if req.subresource == "status":
            new = copy.deepcopy(old)
            if "status" in incoming:
                new["status"] = incoming["status"]
            else:
                new.pop("status", None)
            new["apiVersion"] = incoming.get("apiVersion", old["apiVersion"])
            return new
        new = copy.deepcopy(incoming)
        meta = new["metadata"]
        for key in _SERVER_META:
            meta.pop(key, None)
        for key in (
            "uid",
            "creationTimestamp",
            "generation",
            "resourceVersion",
            "managedFields",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ):
            if key in old["metadata"]:
                meta[key] = old["metadata"][key]
        if self._keeps_status(resource):
            new.pop("status", None)
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
        if resource.info.kind == "Namespace":
            new["status"] = copy.deepcopy(old.get("status", {"phase": "Active"}))
        self._defaults(resource, new)
        return new

    def _update(
        self,
        req: ApiRequest,
        old: dict[str, Any],
        incoming: dict[str, Any],
        *,
        manager: str,
        dry_run: bool,
        entries: list[ssa.ManagedEntry] | None = None,
    ) -> tuple[bool, dict[str, Any]]:
        """Validate and store ``incoming`` over ``old``; (changed, object). Lock is held."""
        resource = req.resource
        new = self._merge_server_fields(req, old, incoming) if entries is None else incoming
        if req.subresource == "resize":
            # In-place resize: only the containers' resources (and resizePolicy) change.
            new = resized_pod(old, new)
            problems = validate_pod_resize(new, old)
            if problems:
                raise errors.invalid(resource.info.kind, req.name or "", problems)
        self._validate(resource, new, old)
        self._admit(resource, new, old, req=req, dry_run=dry_run)
        ignore = ("resourceVersion", "managedFields")
        old_cmp = _without({**old, "apiVersion": resource.info.api_version}, ignore)
        new_cmp = _without({**new, "apiVersion": resource.info.api_version}, ignore)
        old_entries = ssa.parse_entries(old)
        now = now_rfc3339()
        if entries is None:
            entries = ssa.record_update(
                old,
                new,
                old_entries,
                manager=manager,
                api_version=resource.info.api_version,
                now=now,
                drop_status=self._keeps_status(resource) and req.subresource != "status",
                subresource=req.subresource or "",
            )
        same_entries = len(entries) == len(old_entries) and all(
            a.same_fields(b) for a, b in zip(entries, old_entries, strict=True)
        )
        if old_cmp == new_cmp and same_entries:
            return False, old
        meta = new["metadata"]
        if _spec_part(old) != _spec_part(new):
            meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        else:
            meta["generation"] = old["metadata"].get("generation", 1)
        meta["managedFields"] = [e.to_json() for e in entries]
        if not meta["managedFields"]:
            del meta["managedFields"]
        if not dry_run:
            meta["resourceVersion"] = self.store.next_resource_version()
        new["metadata"] = _order_meta(meta)
        new["apiVersion"] = resource.info.api_version
        if not dry_run:
            self._persist(resource, new)
        return True, new

    def patch(self, req: ApiRequest) -> tuple[int, dict[str, Any]]:
        if req.subresource not in (None, "status", "resize"):
            raise errors.not_found(
                req.resource.info.plural, req.name or "", req.resource.info.group
            )
        ctype = req.content_type.split(";")[0].strip().lower()
        if ctype == APPLY_PATCH:
            return self._apply(req)
        if ctype not in (MERGE_PATCH, STRATEGIC_PATCH, JSON_PATCH):
            raise errors.unsupported_media_type(ctype)
        if ctype == STRATEGIC_PATCH and req.resource.info.is_crd:
            raise errors.unsupported_media_type(ctype)
        try:
            patch = json.loads(req.body or b"null")
        except ValueError as exc:
            raise errors.bad_request(f"error decoding patch: {exc}") from exc
        dry_run = self._dry_run(req)
        manager = self._manager(req)
        info = req.resource.info
        with self.store.lock:
            old = self._existing(req)
            base = self._out(req.resource, old)
            try:
                if ctype == JSON_PATCH:
                    patched = json_patch(base, patch)
                elif ctype == MERGE_PATCH:
                    patched = merge_patch(base, patch)
                else:
                    patched = strategic_merge_patch(base, patch)
            except PatchError as exc:
                raise errors.ApiError(
                    422, "Invalid", str(exc), {"name": req.name, "kind": info.kind}
                ) from exc
            if not isinstance(patched, dict):
                raise errors.bad_request("the patch must produce an object")
            patched = strip_nulls(patched)
            self._check_type(req, patched)
            meta = patched["metadata"]
            if meta.get("name") != req.name or (
                info.namespaced and meta.get("namespace") != req.namespace
            ):
                raise errors.invalid(
                    info.kind,
                    req.name or "",
                    [FieldError("metadata.name", "Invalid value: field is immutable")],
                    info.group,
                )
            wanted = meta.get("resourceVersion")
            if wanted and wanted != old["metadata"].get("resourceVersion"):
                raise errors.conflict(info.plural, req.name or "", info.group)
            _, result = self._update(req, old, patched, manager=manager, dry_run=dry_run)
        return 200, self._out(req.resource, result)

    def _apply(self, req: ApiRequest) -> tuple[int, dict[str, Any]]:
        info = req.resource.info
        manager = req.query.get("fieldManager", "")
        if not manager:
            raise errors.ApiError(
                422,
                "Invalid",
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
                "is required for apply patch",
                {
                    "group": "meta.k8s.io",
                    "kind": "PatchOptions",
                    "causes": [
                        {
                            "reason": "FieldValueRequired",
                            "message": "Required value: is required for apply patch",
                            "field": "fieldManager",
                        }
                    ],
                },
            )
        force = req.query.get("force", "").lower() == "true"
        dry_run = self._dry_run(req)
        applied = self._parse(req)
        self._check_type(req, applied, require=True)
        self._check_identity(req, applied)
        meta = applied["metadata"]
        if meta.get("managedFields"):
            raise errors.bad_request("metadata.managedFields must be nil")
        wanted = meta.pop("resourceVersion", None)
        for key in ("uid", "creationTimestamp", "generation", "selfLink"):
            meta.pop(key, None)
        drop_status = self._keeps_status(req.resource) and req.subresource != "status"
        if drop_status:
            applied.pop("status", None)
        with self.store.lock:
            old = self.store.get(req.resource.key, req.namespace or "", req.name or "")
            if old is None:
                if req.subresource:
                    raise errors.not_found(info.plural, req.name or "", info.group)
                obj = copy.deepcopy(applied)
                created = self._new_object(
                    req.resource,
                    obj,
                    manager=manager,
                    operation="Apply",
                    dry_run=dry_run,
                    applied=applied,
                    req=req,
                )
                return 201, self._out(req.resource, created)
            if wanted and wanted != old["metadata"].get("resourceVersion"):
                raise errors.conflict(info.plural, req.name or "", info.group)
            live = self._out(req.resource, old)
            try:
                result, entries = ssa.apply(
                    live,
                    applied,
                    ssa.parse_entries(old),
                    manager=manager,
                    api_version=info.api_version,
                    now=now_rfc3339(),
                    force=force,
                    drop_status=drop_status,
                )
            except ssa.ApplyConflict as exc:
                raise _conflict_error(exc) from exc
            result["metadata"] = {
                **result["metadata"],
                **{
                    k: old["metadata"][k]
                    for k in ("uid", "creationTimestamp", "generation", "resourceVersion")
                    if k in old["metadata"]
                },
            }
            self._defaults(req.resource, result)
            _, stored = self._update(
                req, old, result, manager=manager, dry_run=dry_run, entries=entries
            )
        return 200, self._out(req.resource, stored)

    # -- delete --------------------------------------------------------------------------

    def delete(self, req: ApiRequest) -> dict[str, Any]:
        resource = req.resource
        info = resource.info
        if req.subresource:
            raise errors.method_not_allowed()
        dry_run = self._dry_run(req)
        options: dict[str, Any] = {}
        if req.body.strip():
            try:
                options = json.loads(req.body)
            except ValueError as exc:
                raise errors.bad_request(f"error decoding DeleteOptions: {exc}") from exc
        preconditions = (options or {}).get("preconditions") or {}
        with self.store.lock:
            old = self._existing(req)
            meta = old["metadata"]
            for key in ("uid", "resourceVersion"):
                wanted = preconditions.get(key)
                label = "UID" if key == "uid" else "ResourceVersion"
                if wanted and wanted != meta.get(key):
                    raise errors.ApiError(
                        409,
                        "Conflict",
                        f'Operation cannot be fulfilled on {info.plural} "{req.name}": '
                        f"Precondition failed: {label} in precondition: {wanted}, "
                        f"{label} in object meta: {meta.get(key)}",
                        {"name": req.name, "kind": info.plural},
                    )
            if info.kind == "Namespace" and req.name in PROTECTED_NAMESPACES:
                raise errors.forbidden(
                    f'namespaces "{req.name}" is forbidden: this namespace may not be deleted',
                    {"name": req.name, "kind": "namespaces"},
                )
            self._admit(resource, None, old, req=req, dry_run=dry_run)
            if info.kind == "Namespace":
                return self._out(resource, self._terminate_namespace(old, dry_run=dry_run))
            if dry_run:
                return self._deleted_answer(resource, old)
            self.store.delete(resource.key, req.namespace or "", req.name or "")
            self.store.next_resource_version()
            self.stats.count_write(info.kind, old, "DELETE")
        return self._deleted_answer(resource, old)

    def _terminate_namespace(self, old: dict[str, Any], *, dry_run: bool) -> dict[str, Any]:
        """DELETE of a namespace: it turns Terminating (deletionTimestamp set); its objects go,
        then the namespace itself, after ``namespace_finalize_seconds``. Lock is held."""
        if (old.get("status") or {}).get("phase") == "Terminating":
            return old
        name = old["metadata"]["name"]
        terminating = copy.deepcopy(old)
        terminating["metadata"]["deletionTimestamp"] = now_rfc3339()
        terminating["metadata"]["deletionGracePeriodSeconds"] = 0
        terminating["status"] = {"phase": "Terminating"}
        if dry_run:
            return terminating
        if self.namespace_finalize_seconds <= 0:
            self._finalize_namespace(name, old["metadata"].get("uid"))
            return terminating
        terminating["metadata"]["resourceVersion"] = self.store.next_resource_version()
        terminating["metadata"] = _order_meta(terminating["metadata"])
        self._persist(self.namespaces, terminating)
        timer = threading.Timer(
            self.namespace_finalize_seconds,
            self._finalize_namespace_locked,
            args=(name, old["metadata"].get("uid")),
        )
        timer.daemon = True
        self._finalizers[name] = timer
        timer.start()
        return terminating

    def _finalize_namespace_locked(self, name: str, uid: str | None) -> None:
        with self.store.lock:
            self._finalize_namespace(name, uid)

    def _finalize_namespace(self, name: str, uid: str | None) -> None:
        """Remove a terminating namespace's objects, then the namespace. Lock is held."""
        self._finalizers.pop(name, None)
        current = self.store.get(self.namespaces.key, "", name)
        if current is None or current["metadata"].get("uid") != uid:
            return
        self._delete_namespace_contents(name)
        self.store.delete(self.namespaces.key, "", name)
        self.store.next_resource_version()
        self.stats.count_write("Namespace", current, "DELETE")

    def finish_terminating_namespaces(self) -> None:
        """Finalize now every namespace still Terminating (on start and on stop)."""
        with self.store.lock:
            for timer in self._finalizers.values():
                timer.cancel()
            self._finalizers.clear()
            for _, obj in self.store.items(self.namespaces.key):
                if (obj.get("status") or {}).get("phase") == "Terminating":
                    self._finalize_namespace(obj["metadata"]["name"], obj["metadata"].get("uid"))

    def _deleted_answer(self, resource: Resource, old: dict[str, Any]) -> dict[str, Any]:
        # kube-apiserver returns the deleted object where its OpenAPI says so (ResourceQuota, Pod,
        # ServiceAccount, custom resources), the Terminating namespace for namespaces (its
        # OpenAPI says Status), and a Status for the other built-in kinds.
        info = resource.info
        if info.kind == "Namespace":
            gone = copy.deepcopy(old)
            gone["metadata"]["deletionTimestamp"] = now_rfc3339()
            gone["status"] = {"phase": "Terminating"}
            return self._out(resource, gone)
        if info.delete_returns_object:
            return self._out(resource, old)
        return _status_success(resource, old)

    def _delete_namespace_contents(self, namespace: str) -> None:
        for key in self.store.resources():
            for (ns, name), obj in self.store.items(key, namespace):
                self.store.delete(key, ns, name)
                self.stats.count_write(obj.get("kind", ""), obj, "DELETE")

    def delete_collection(self, req: ApiRequest) -> dict[str, Any]:
        dry_run = self._dry_run(req)
        with self.store.lock:
            _, items = self.list(req)
            info = req.resource.info
            for item in items:
                self._admit(req.resource, None, item, req=req, dry_run=dry_run)
            if not dry_run:
                for item in items:
                    meta = item["metadata"]
                    if info.kind == "Namespace":
                        if meta["name"] in PROTECTED_NAMESPACES:
                            continue
                        stored = self.store.get(self.namespaces.key, "", meta["name"])
                        if stored is not None:
                            self._terminate_namespace(stored, dry_run=False)
                        continue
                    self.store.delete(req.resource.key, meta.get("namespace", ""), meta["name"])
                    self.store.next_resource_version()
                    self.stats.count_write(info.kind, item, "DELETE")
            return {
                "apiVersion": info.api_version,
                "kind": info.kind + "List",
                "metadata": {"resourceVersion": str(self.store.resource_version)},
                "items": items,
            }

    # -- seeding -------------------------------------------------------------------------

    def ensure_default_namespaces(self) -> None:
        with self.store.lock:
            for name in DEFAULT_NAMESPACES:
                if self.store.get(self.namespaces.key, "", name) is None:
                    obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                    self._new_object(
                        self.namespaces,
                        obj,
                        manager="kube-apiserver",
                        operation="Update",
                        dry_run=False,
                        count=False,
                    )

    def load_objects(self, objects: list[dict[str, Any]]) -> None:
        with self.store.lock:
            for obj in objects:
                resource = self.discovery.by_kind.get(
                    (obj.get("apiVersion", ""), obj.get("kind", ""))
                )
                if resource is None:
                    continue
                meta = obj["metadata"]
                self.store.put(resource.key, meta.get("namespace", ""), meta["name"], obj)


_META_ORDER = (
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "labels",
    "annotations",
)


def _order_meta(meta: dict[str, Any]) -> dict[str, Any]:
    ordered = {k: meta[k] for k in _META_ORDER if k in meta}
    ordered.update({k: v for k, v in meta.items() if k not in ordered})
    return ordered


def _pod_forbidden(pod: str, message: str) -> errors.ApiError:
    return errors.forbidden(f'pods "{pod}" is forbidden: {message}', {"name": pod, "kind": "pods"})


def _conflict_error(exc: ssa.ApplyConflict) -> errors.ApiError:
    by_manager: dict[tuple[str, str], list[str]] = {}
    for manager, api_version, path in exc.conflicts:
        by_manager.setdefault((manager, api_version), []).append(path)
    count = len(exc.conflicts)
    parts = []
    for (manager, api_version), paths in by_manager.items():
        if len(paths) == 1:
            parts.append(f'conflict with "{manager}" using {api_version}: {paths[0]}')
        else:
            listed = "".join(f"\n- {p}" for p in paths)
            parts.append(f'conflicts with "{manager}" using {api_version}:{listed}')
    message = f"Apply failed with {count} conflict{'s' if count != 1 else ''}: " + "\n".join(parts)
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f'conflict with "{manager}" using {api_version}',
            "field": path,
        }
        for manager, api_version, path in exc.conflicts
    ]
    return errors.ApiError(409, "Conflict", message, {"causes": causes})
