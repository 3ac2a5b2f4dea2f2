"""Fault injection and request statistics of the sandbox API server.

Faults model what a real API server and the network do to a client: error answers (429 with
``Retry-After``, 500, 503...), latency, requests that hang past the client's timeout, dropped
connections, and the lost-response case where the write happened but the answer never arrived.
"""

from __future__ import annotations

import random
import threading
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

FAULT_KINDS = ("status", "latency", "timeout", "drop", "drop_after_write")
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
WRITE_LOG_LIMIT = 100_000


@dataclass
class FaultRule:
    """One fault; ``count`` limits it to the next N matching requests, ``ratio`` to a share."""

    kind: str
    count: int | None = None
    ratio: float | None = None
    methods: frozenset[str] | None = None
    path_contains: str | None = None
    status: int | None = None
    seconds: float | None = None
    seed: int | None = None
    retry_after: int = 1
    fired: int = 0
    _rng: random.Random = field(default_factory=random.Random, repr=False)

    def matches(self, method: str, path: str) -> bool:
        if self.methods is not None and method not in self.methods:
            return False
        return self.path_contains is None or self.path_contains in path

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "count": self.count,
            "ratio": self.ratio,
            "methods": sorted(self.methods) if self.methods is not None else None,
            "path_contains": self.path_contains,
            "status": self.status,
            "seconds": self.seconds,
            "seed": self.seed,
            "retry_after": self.retry_after,
            "fired": self.fired,
        }


class Faults:
    """The active fault rules of one server; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []

    def add(
        self,
        kind: str,
        *,
        count: int | None = None,
        ratio: float | None = None,
        methods: set[str] | frozenset[str] | list[str] | tuple[str, ...] | None = None,
        path_contains: str | None = None,
        status: int | None = None,
        seconds: float | None = None,
        seed: int | None = None,
        retry_after: int = 1,
    ) -> FaultRule:
        """Add a fault. Without ``count`` or ``ratio`` it hits every matching request.

        ``kind``: ``status`` (answer ``status`` without executing), ``latency`` (sleep ``seconds``,
        then serve), ``timeout`` (hold ``seconds``, then close without answer; not executed),
        ``drop`` (close without answer; not executed), ``drop_after_write`` (execute, then close
        without answer).
        """
        if kind not in FAULT_KINDS:
            raise ValueError(
                f"unknown fault kind {kind!r}; expected one of {', '.join(FAULT_KINDS)}"
            )
        if kind == "status" and not status:
            raise ValueError("a status fault needs status=<HTTP code>")
        if kind in ("latency", "timeout") and seconds is None:
            raise ValueError(f"a {kind} fault needs seconds=")
        if ratio is not None and not 0 <= ratio <= 1:
            raise ValueError("ratio must be between 0 and 1")
        if count is not None and count < 0:
            raise ValueError("count must be >= 0")
        rule = FaultRule(
            kind=kind,
            count=count,
            ratio=ratio,
            methods=frozenset(m.upper() for m in methods) if methods is not None else None,
            path_contains=path_contains,
            status=status,
            seconds=seconds,
            seed=seed,
            retry_after=retry_after,
            _rng=random.Random(seed),
        )
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    @property
    def rules(self) -> list[FaultRule]:
        with self._lock:
            return list(self._rules)

    def pick(self, method: str, path: str) -> FaultRule | None:
        """The fault to inject into this request, if any (consumes counts and RNG draws)."""
        with self._lock:
            for rule in self._rules:
                if not rule.matches(method, path):
                    continue
                if rule.count is not None and rule.fired >= rule.count:
                    continue
                if rule.ratio is not None and rule._rng.random() >= rule.ratio:
                    continue
                rule.fired += 1
                return rule
        return None


class Stats:
    """Request and write counters of one server; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.writes = 0
        self.writes_by_kind: Counter[str] = Counter()
        self.faults_injected = 0
        # Every persisted write in order (bounded): lets tests check ordering across writers.
        self.write_log: deque[dict[str, Any]] = deque(maxlen=WRITE_LOG_LIMIT)

    def count_request(self, method: str) -> None:
        with self._lock:
            self.requests[method] += 1

    def count_write(self, kind: str, obj: dict[str, Any] | None = None, method: str = "") -> None:
        with self._lock:
            self.writes += 1
            self.writes_by_kind[kind] += 1
            meta = (obj or {}).get("metadata") or {}
            self.write_log.append(
                {
                    "method": method,
                    "kind": kind,
                    "namespace": meta.get("namespace", ""),
                    "name": meta.get("name", ""),
                    "resourceVersion": meta.get("resourceVersion", ""),
                    "annotations": dict(meta.get("annotations") or {}),
                }
            )

    def count_fault(self) -> None:
        with self._lock:
            self.faults_injected += 1

    def writes_in_order(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.write_log)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.writes = 0
            self.writes_by_kind.clear()
            self.faults_injected = 0
            self.write_log.clear()

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            return {
                "requests": dict(self.requests),
                "requests_total": sum(self.requests.values()),
                "writes": self.writes,
                "writes_by_kind": dict(self.writes_by_kind),
                "faults_injected": self.faults_injected,
            }
