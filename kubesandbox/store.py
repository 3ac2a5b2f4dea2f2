"""The sandbox's object store: one lock, one global resourceVersion counter, optional JSON file.

Stored objects are never mutated in place (every write stores a new dict), so readers may
serialize what they got after releasing the lock.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ResourceKey = tuple[str, str]  # (group, plural)
ObjectKey = tuple[str, str]  # (namespace or "", name)


class Store:
    def __init__(self, state_file: str | os.PathLike[str] | None = None) -> None:
        self.lock = threading.RLock()
        self.state_file = Path(state_file) if state_file else None
        self.resource_version = 0
        self._objects: dict[ResourceKey, dict[ObjectKey, dict[str, Any]]] = {}
        self._dirty = threading.Event()
        self._stopping = threading.Event()
        self._flusher: threading.Thread | None = None

    # -- access (callers hold ``lock`` for read-modify-write sequences) ------------------

    def next_resource_version(self) -> str:
        self.resource_version += 1
        return str(self.resource_version)

    def get(self, resource: ResourceKey, namespace: str, name: str) -> dict[str, Any] | None:
        return self._objects.get(resource, {}).get((namespace, name))

    def put(self, resource: ResourceKey, namespace: str, name: str, obj: dict[str, Any]) -> None:
        self._objects.setdefault(resource, {})[(namespace, name)] = obj
        self._dirty.set()

    def delete(self, resource: ResourceKey, namespace: str, name: str) -> None:
        self._objects.get(resource, {}).pop((namespace, name), None)
        self._dirty.set()

    def items(
        self, resource: ResourceKey, namespace: str | None = None
    ) -> list[tuple[ObjectKey, dict[str, Any]]]:
        """Objects of one resource sorted by (namespace, name); all namespaces when None."""
        objects = self._objects.get(resource, {})
        if namespace is None:
            return sorted(objects.items())
        return sorted((k, v) for k, v in objects.items() if k[0] == namespace)

    def values(self, resource: ResourceKey) -> list[dict[str, Any]]:
        """Objects of one resource in every namespace, unsorted (in the order they were
        first stored): for admission checks that read them all on every write."""
        return list(self._objects.get(resource, {}).values())

    def resources(self) -> Iterator[ResourceKey]:
        return iter(list(self._objects))

    def clear(self) -> None:
        self._objects.clear()
        self._dirty.set()

    def counts(self) -> dict[str, int]:
        with self.lock:
            return {
                f"{plural}.{group}" if group else plural: len(objs)
                for (group, plural), objs in self._objects.items()
            }

    # -- persistence ---------------------------------------------------------------------

    def load(self) -> list[dict[str, Any]]:
        """Objects of the state file (empty when there is none); sets the resourceVersion."""
        if not self.state_file or not self.state_file.exists():
            return []
        with self.state_file.open(encoding="utf-8") as fh:
            state = json.load(fh)
        self.resource_version = int(state.get("resourceVersion", 0))
        return list(state.get("objects", []))

    def snapshot(self) -> bytes:
        with self.lock:
            objects = [
                obj for per_resource in self._objects.values() for obj in per_resource.values()
            ]
            state = {"resourceVersion": self.resource_version, "objects": objects}
            self._dirty.clear()
            return json.dumps(state, separators=(",", ":")).encode()

    def save(self) -> None:
        if not self.state_file:
            return
        data = self.snapshot()
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".sandbox-state-", dir=self.state_file.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.state_file)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def start_flusher(self, delay: float = 0.05) -> None:
        """Write the state file shortly after writes (batching bursts), until ``stop_flusher``."""
        if not self.state_file or self._flusher:
            return
        self._stopping.clear()

        def run() -> None:
            while not self._stopping.is_set():
                if self._dirty.wait(0.5) and not self._stopping.is_set():
                    self._stopping.wait(delay)
                    if not self._stopping.is_set():
                        self.save()

        self._flusher = threading.Thread(target=run, name="kube-sandbox-state", daemon=True)
        self._flusher.start()

    def stop_flusher(self) -> None:
        if self._flusher:
            self._stopping.set()
            self._dirty.set()  # wakes the flusher; the final save below writes the state
            self._flusher.join()
            self._flusher = None
        if self.state_file:
            self.save()
