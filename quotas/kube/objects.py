"""A Kubernetes object the portal manages, in one shape: built as the renderer writes it
(``kube_object``), and named by its ``ObjectKey`` (apiVersion, kind, namespace, name) wherever
the sync, the client and the rows that record objects (what the portal last applied, sync
results, drift events) need to say which object they mean. Pure: no I/O, no Django.
"""

from __future__ import annotations

from typing import Any, NamedTuple


def kube_object(api_version: str, kind: str, metadata: dict, **content: Any) -> dict:
    """An object as it is applied: apiVersion, kind, metadata, then ``content`` (spec, data,
    or a kind's own top-level fields), in that order."""
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **content}


class ObjectKey(NamedTuple):
    """Which object: still a plain 4-tuple (``key[1]`` is the kind), with names."""

    api_version: str
    kind: str
    namespace: str  # "" for cluster-scoped objects
    name: str

    @classmethod
    def of(cls, obj: dict) -> ObjectKey:
        """The key of a rendered or live object."""
        meta = obj.get("metadata") or {}
        return cls(obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"])

    @classmethod
    def of_row(cls, row: Any) -> ObjectKey:
        """The key of a row that records an object (its api_version, kind, namespace, name)."""
        return cls(row.api_version, row.kind, row.namespace, row.name)

    @property
    def group_kind(self) -> tuple[str, str]:
        return self.api_version, self.kind

    def row_fields(self) -> dict[str, str]:
        """The key as the fields of a row that records the object."""
        return self._asdict()
