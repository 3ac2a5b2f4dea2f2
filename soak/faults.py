"""Faults of a soak run, on a schedule spread over its length: the sandbox API servers fail a
share of writes throughout (5xx, 429, dropped connections, lost answers) and stall now and then;
a Celery worker is SIGKILLed while it holds a cluster's sync lease (mid-task) and restarted;
the Redis server is stopped and started again; every database connection but the harness's is
terminated. Each fault is recorded with its time window."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass

import requests

from soak.stack import Child, Database, wait_until

WRITES = ["POST", "PUT", "PATCH", "DELETE"]
# A share of every write fails, all run long (the same rules on every sandbox).
BASE_RULES = [
    {"kind": "status", "status": 500, "ratio": 0.08, "methods": WRITES},
    {"kind": "status", "status": 503, "ratio": 0.04, "methods": WRITES, "retry_after": 1},
    {"kind": "status", "status": 429, "ratio": 0.04, "methods": WRITES, "retry_after": 1},
    {"kind": "drop", "ratio": 0.02, "methods": WRITES},
    {"kind": "drop_after_write", "ratio": 0.02, "methods": WRITES},
]
STALL_SECONDS = 8.0
KILL_WAIT_SECONDS = 20.0
WORKER_DOWN_SECONDS = 3.0
REDIS_DOWN_SECONDS = 2.0
# After Redis is back, clients may still meet a connection the restart broke.
REDIS_GRACE_SECONDS = 3.0

# (share of the run, fault): every kind at least once, whatever the length.
SCHEDULE = [
    (0.12, "db_drop"),
    (0.20, "sandbox_stall"),
    (0.30, "worker_kill"),
    (0.45, "redis_restart"),
    (0.55, "db_drop"),
    (0.62, "sandbox_stall"),
    (0.72, "worker_kill"),
    (0.82, "db_drop"),
]


@dataclass
class FaultEvent:
    kind: str
    started: float  # seconds since the run started
    ended: float
    detail: str = ""


class SandboxControl:
    """The fault API of the sandbox servers (``--allow-faults``)."""

    def __init__(self, urls: list[str], token: str):
        self.urls = urls
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"
        self.fired: Counter = Counter()

    def _collect(self, url: str) -> None:
        answer = self.session.get(f"{url}/sandbox/faults", timeout=10)
        for rule in answer.json().get("faults", []):
            label = rule["kind"] if rule["kind"] != "status" else f"status {rule['status']}"
            self.fired[label] += rule["fired"]

    def set(self, rules: list[dict]) -> None:
        """Replace every rule (counting what the old ones fired)."""
        for url in self.urls:
            self._collect(url)
            self.session.delete(f"{url}/sandbox/faults", timeout=10).raise_for_status()
            for rule in rules:
                self.session.post(f"{url}/sandbox/faults", json=rule, timeout=10).raise_for_status()

    def clear(self) -> None:
        self.set([])


class FaultInjector(threading.Thread):
    """Runs the schedule; ``stop()`` ends it (a fault under way finishes first)."""

    def __init__(
        self,
        *,
        seconds: float,
        now: Callable[[], float],
        sandboxes: SandboxControl,
        kube_timeout: float,
        workers: dict[str, Child],
        redis: Child,
        redis_ready: Callable[[], bool],
        database: Database,
        lease_holders: Callable[[], list[str]],
    ):
        super().__init__(name="soak-faults", daemon=True)
        self.seconds = seconds
        self.now = now
        self.sandboxes = sandboxes
        self.kube_timeout = kube_timeout
        self.workers = workers
        self.redis = redis
        self.redis_ready = redis_ready
        self.database = database
        self.lease_holders = lease_holders
        self.events: list[FaultEvent] = []
        self.errors: list[str] = []
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        try:
            self._guarded("sandbox_errors", lambda: self.sandboxes.set(BASE_RULES))
            for share, kind in SCHEDULE:
                if self._halt.wait(max(0.0, share * self.seconds - self.now())):
                    return
                self._guarded(kind, getattr(self, kind))
        finally:
            self._close_django_connection()

    def _guarded(self, kind: str, action: Callable[[], object]) -> None:
        try:
            action()
        except Exception as exc:  # reported: a fault that could not be injected
            self.errors.append(f"{kind}: {type(exc).__name__}: {exc}")

    def _record(self, kind: str, started: float, detail: str = "") -> FaultEvent:
        event = FaultEvent(kind, started, self.now(), detail)
        self.events.append(event)
        return event

    # -- the faults -------------------------------------------------------------------------

    def sandbox_stall(self) -> None:
        """Writes hang past the portal's request timeout, and every request slows down."""
        started = self.now()
        hang = self.kube_timeout + 2
        self.sandboxes.set(
            [
                {"kind": "timeout", "seconds": hang, "ratio": 0.5, "methods": WRITES},
                {"kind": "latency", "seconds": 1.0, "ratio": 0.3},
                *BASE_RULES,
            ]
        )
        self._halt.wait(STALL_SECONDS)
        self.sandboxes.set(BASE_RULES)
        self._record("sandbox_stall", started, f"writes hang {hang:.0f} s (half), latency 1 s")

    def worker_kill(self) -> None:
        """SIGKILL the worker that holds a cluster's sync lease (mid-task); restart it."""
        started = self.now()
        # Slow writes make the syncs long enough to be caught in the middle.
        self.sandboxes.set([{"kind": "latency", "seconds": 1.5, "methods": WRITES}, *BASE_RULES])
        victim, mid_task = None, False
        deadline = time.monotonic() + KILL_WAIT_SECONDS
        try:
            while victim is None and time.monotonic() < deadline and not self._halt.is_set():
                for holder in self.lease_holders():
                    name = holder.split("@", 1)[0]
                    if name in self.workers:
                        victim, mid_task = name, True
                        break
                else:
                    time.sleep(0.05)
            if victim is None:
                victim = sorted(self.workers)[0]
            self.workers[victim].kill()
        finally:
            self.sandboxes.set(BASE_RULES)
        self._halt.wait(WORKER_DOWN_SECONDS)
        self.workers[victim].start()
        how = "holding a sync lease" if mid_task else "idle (no sync seen in time)"
        self._record("worker_kill", started, f"{victim} SIGKILLed {how}, restarted")

    def redis_restart(self) -> None:
        started = self.now()
        self.redis.stop(grace=10)
        time.sleep(REDIS_DOWN_SECONDS)
        self.redis.start()
        wait_until(self.redis_ready, timeout=30, what="redis-server after its restart")
        event = self._record("redis_restart", started, f"down {REDIS_DOWN_SECONDS:.0f} s")
        event.ended += REDIS_GRACE_SECONDS

    def db_drop(self) -> None:
        started = self.now()
        cut = self.database.terminate_backends()
        names = Counter(cut)
        self._record("db_drop", started, ", ".join(f"{n}×{c}" for n, c in sorted(names.items())))

    def _close_django_connection(self) -> None:
        from django.db import connection

        connection.close()

    def as_json(self) -> list[dict]:
        return [asdict(e) for e in self.events]
