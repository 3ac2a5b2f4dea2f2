"""The resources the sandbox serves and the discovery documents that describe them.

Answers ``/version``, ``/api``, ``/api/v1``, ``/apis``, ``/apis/<group>[/<version>]`` and the
OpenAPI v3 index and documents (``/openapi/v3``), in the legacy (non-aggregated) discovery format,
which both the official Python client and kubectl understand.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubesandbox.schemas import KindInfo, known_kinds, openapi_documents

# (apiVersion, kind) served, in discovery order. Kueue serves v1beta2 (storage) and v1beta1.
SERVED_KINDS: tuple[tuple[str, str], ...] = (
    ("v1", "Namespace"),
    ("v1", "ResourceQuota"),
    ("v1", "LimitRange"),
    ("v1", "ConfigMap"),
    ("v1", "Pod"),
    ("v1", "ServiceAccount"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("policy/v1", "PodDisruptionBudget"),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"),
    ("scheduling.volcano.sh/v1beta1", "Queue"),
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
    ("kueue.x-k8s.io/v1beta2", "LocalQueue"),
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"),
    ("kueue.x-k8s.io/v1beta2", "Cohort"),
    ("kueue.x-k8s.io/v1beta1", "ClusterQueue"),
    ("kueue.x-k8s.io/v1beta1", "LocalQueue"),
    ("kueue.x-k8s.io/v1beta1", "ResourceFlavor"),
    ("kueue.x-k8s.io/v1beta1", "Cohort"),
)

# Short names of the core kinds (the OpenAPI documents do not carry them; CRDs do).
_CORE_SHORT_NAMES = {
    "namespaces": ("ns",),
    "resourcequotas": ("quota",),
    "limitranges": ("limits",),
    "configmaps": ("cm",),
    "pods": ("po",),
    "serviceaccounts": ("sa",),
    "priorityclasses": ("pc",),
    "poddisruptionbudgets": ("pdb",),
}
_CATEGORIES = {"pods": ("all",)}
_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
# Preferred version of each group: the first listed above.
SERVER_VERSION = {
    "major": "1",
    "minor": "35",
    "emulationMajor": "1",
    "emulationMinor": "35",
    "minCompatibilityMajor": "1",
    "minCompatibilityMinor": "34",
    "gitVersion": "v1.35.0-sandbox",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


@dataclass(frozen=True)
class Resource:
    """A served resource: the kind info plus its discovery attributes."""

    info: KindInfo
    short_names: tuple[str, ...]

    @property
    def key(self) -> tuple[str, str]:
        """Storage key of the resource, shared by all versions of a group."""
        return (self.info.group, self.info.plural)


class Discovery:
    """Lookup tables and pre-rendered discovery documents, built once per process (per set of
    omitted group-versions)."""

    _instances: dict[frozenset[str], Discovery] = {}
    _lock = threading.Lock()

    def __init__(self, omit_api_versions: frozenset[str] = frozenset()) -> None:
        kinds = known_kinds()
        self.omitted = omit_api_versions
        self.resources: list[Resource] = []
        # (group, version, plural) -> Resource
        self.by_path: dict[tuple[str, str, str], Resource] = {}
        # (apiVersion, kind) -> Resource
        self.by_kind: dict[tuple[str, str], Resource] = {}
        self.group_versions: dict[str, list[str]] = {}
        for key in SERVED_KINDS:
            if key[0] in omit_api_versions:
                continue  # as on a cluster without that CRD (version)
            info = kinds[key]
            short = info.short_names or _CORE_SHORT_NAMES.get(info.plural, ())
            resource = Resource(info, short)
            self.resources.append(resource)
            self.by_path[(info.group, info.version, info.plural)] = resource
            self.by_kind[key] = resource
            versions = self.group_versions.setdefault(info.group, [])
            if info.version not in versions:
                versions.append(info.version)
        self._documents: dict[str, bytes] = {}
        self._hashes: dict[str, str] = {}
        self._docs_lock = threading.Lock()

    @classmethod
    def get(cls, omit_api_versions: frozenset[str] = frozenset()) -> Discovery:
        """The shared instance serving every kind but those of ``omit_api_versions``."""
        instance = cls._instances.get(omit_api_versions)
        if instance is None:
            with cls._lock:
                instance = cls._instances.get(omit_api_versions)
                if instance is None:
                    unknown = sorted(
                        omit_api_versions - {api_version for api_version, _ in SERVED_KINDS}
                    )
                    if unknown:
                        raise ValueError(f"not a served API version: {', '.join(unknown)}")
                    instance = Discovery(omit_api_versions)
                    cls._instances[omit_api_versions] = instance
        return instance

    def resource(self, group: str, version: str, plural: str) -> Resource | None:
        return self.by_path.get((group, version, plural))

    # -- discovery documents -------------------------------------------------------------

    def api_versions(self, server_address: str) -> dict[str, Any]:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
            ],
        }

    def _group(self, group: str) -> dict[str, Any]:
        versions = [
            {"groupVersion": f"{group}/{v}", "version": v} for v in self.group_versions[group]
        ]
        return {"name": group, "versions": versions, "preferredVersion": versions[0]}

    def served(self, api_version: str) -> bool:
        return api_version not in self.omitted

    def api_group_list(self) -> dict[str, Any]:
        groups = [self._group(g) for g in self.group_versions if g]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def api_group(self, group: str) -> dict[str, Any] | None:
        if not group or group not in self.group_versions:
            return None
        return {"kind": "APIGroup", "apiVersion": "v1", **self._group(group)}

    def resource_list(self, group: str, version: str) -> dict[str, Any] | None:
        if version not in self.group_versions.get(group, []):
            return None
        resources: list[dict[str, Any]] = []
        for resource in self.resources:
            info = resource.info
            if (info.group, info.version) != (group, version):
                continue
            entry: dict[str, Any] = {
                "name": info.plural,
                "singularName": info.singular,
                "namespaced": info.namespaced,
                "kind": info.kind,
                "verbs": list(_VERBS),
            }
            if resource.short_names:
                entry["shortNames"] = list(resource.short_names)
            if info.plural in _CATEGORIES:
                entry["categories"] = list(_CATEGORIES[info.plural])
            entry["storageVersionHash"] = hashlib.sha256(info.kind.encode()).hexdigest()[:11]
            resources.append(entry)
            for sub in sorted(info.subresources & {"status", "resize"}):
                resources.append(
                    {
                        "name": f"{info.plural}/{sub}",
                        "singularName": "",
                        "namespaced": info.namespaced,
                        "kind": info.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
        group_version = f"{group}/{version}" if group else version
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": resources,
        }

    # -- OpenAPI v3 ----------------------------------------------------------------------

    def _served_document_keys(self) -> list[str]:
        keys = []
        for resource in self.resources:
            key = resource.info.group_version
            if key not in keys:
                keys.append(key)
        return keys

    def openapi_document_bytes(self, group_version: str) -> tuple[bytes, str] | None:
        """The serialized document and its hash, or None for a group-version not served."""
        key = group_version.strip("/")
        if key not in self._served_document_keys():
            return None
        with self._docs_lock:
            if key not in self._documents:
                doc = openapi_documents().get(key)
                if doc is None:
                    return None
                data = json.dumps(doc, separators=(",", ":")).encode()
                self._documents[key] = data
                self._hashes[key] = hashlib.sha512(data).hexdigest().upper()[:128]
            return self._documents[key], self._hashes[key]

    def openapi_index(self) -> dict[str, Any]:
        paths = {}
        for key in self._served_document_keys():
            rendered = self.openapi_document_bytes(key)
            if rendered:
                paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={rendered[1]}"}
        return {"paths": paths}


# -- Table output (kubectl get) ---------------------------------------------------------


def _age(timestamp: str | None, now: datetime) -> str:
    if not timestamp:
        return "<unknown>"
    try:
        created = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "<unknown>"
    seconds = max(0, int((now - created).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 120:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h"
    return f"{hours // 24}d"


def _json_path(obj: Any, path: str) -> Any:
    node = obj
    for part in path.strip(".").split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def _cell(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return value


def table(
    resource: Resource, items: list[dict[str, Any]], list_meta: dict[str, Any], include_object: str
) -> dict[str, Any]:
    """A ``meta.k8s.io/v1`` Table of ``items`` as kube-apiserver renders it for ``kubectl get``."""
    info = resource.info
    columns = [
        {"name": "Name", "type": "string", "format": "name", "description": "Name", "priority": 0}
    ]
    extra: list[tuple[str, str]] = []
    if info.kind == "Namespace" or info.kind == "Pod":
        columns.append(
            {
                "name": "Status",
                "type": "string",
                "format": "",
                "description": "Phase",
                "priority": 0,
            }
        )
        extra.append(("Status", ".status.phase"))
    for name, col_type, path in info.printer_columns:
        if path == ".metadata.creationTimestamp":
            continue
        columns.append(
            {"name": name, "type": col_type, "format": "", "description": name, "priority": 0}
        )
        extra.append((name, path))
    columns.append(
        {"name": "Age", "type": "string", "format": "", "description": "Age", "priority": 0}
    )
    now = datetime.now(UTC)
    rows = []
    for item in items:
        meta = item.get("metadata", {})
        cells = [meta.get("name")]
        cells += [_cell(_json_path(item, path)) for _, path in extra]
        cells.append(_age(meta.get("creationTimestamp"), now))
        row: dict[str, Any] = {"cells": cells}
        if include_object == "Object":
            row["object"] = item
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": meta,
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns,
        "rows": rows,
    }
