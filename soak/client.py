"""A REST API client as automation should write one: an ``Idempotency-Key`` per write, kept
across its retries; retries with backoff on lost connections, timeouts, 5xx, 429 (after
``Retry-After``) and a key still in progress; and every answer recorded with its time, so the
end checks can tell a 5xx in a fault window from one outside it."""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import requests

RETRY_STATUSES = frozenset({500, 502, 503, 504, 429})
MAX_ATTEMPTS = 8
BACKOFF_BASE = 0.25
BACKOFF_MAX = 4.0
RETRY_AFTER_MAX = 10.0
HTTP_TIMEOUT = 30.0


@dataclass(frozen=True)
class Exchange:
    """One HTTP attempt: when it started and ended (seconds since the run started), what was
    asked and what came back (status 0: no answer)."""

    started: float
    ended: float
    user: str
    method: str
    path: str
    status: int
    error: str = ""
    attempt: int = 1
    replayed: bool = False
    code: str = ""  # extra.code of an error answer (stale, idempotency_in_progress, ...)
    message: str = ""  # the start of an error answer's message


class Recorder:
    """Every exchange of every client, thread-safe."""

    def __init__(self, started: float):
        self.started = started
        self._lock = threading.Lock()
        self.exchanges: list[Exchange] = []

    def now(self) -> float:
        return time.monotonic() - self.started

    def add(self, exchange: Exchange) -> None:
        with self._lock:
            self.exchanges.append(exchange)

    def snapshot(self) -> list[Exchange]:
        with self._lock:
            return list(self.exchanges)

    def summary(self) -> dict[str, Any]:
        exchanges = self.snapshot()
        by_status = Counter(str(e.status or e.error or "no answer") for e in exchanges)
        return {
            "requests": len(exchanges),
            "retries": sum(1 for e in exchanges if e.attempt > 1),
            "replayed": sum(1 for e in exchanges if e.replayed),
            "by_status": dict(sorted(by_status.items())),
        }

    def as_json(self) -> list[dict]:
        return [asdict(e) for e in self.snapshot()]


@dataclass
class Answer:
    status: int  # 0: no answer after every attempt
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    attempts: int = 1

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def code(self) -> str:
        if isinstance(self.body, dict):
            return str((self.body.get("extra") or {}).get("code") or "")
        return ""

    @property
    def message(self) -> str:
        if isinstance(self.body, dict):
            return str(self.body.get("message") or "")
        return ""


class ApiClient:
    """One person's client (a bearer token); one ``requests.Session`` per client."""

    def __init__(self, *, base_url: str, username: str, token: str, recorder: Recorder, rng):
        self.base_url = base_url.rstrip("/") + "/api/v1/"
        self.username = username
        self.recorder = recorder
        self.rng: random.Random = rng
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"
        self.stopping = threading.Event()

    def close(self) -> None:
        self.session.close()

    def get(self, path: str, **params) -> Answer:
        return self.call("GET", path, params=params or None)

    def write(
        self, method: str, path: str, body: dict | None = None, *, if_match: str | None = None
    ) -> Answer:
        headers = {"Idempotency-Key": str(uuid.uuid4())}
        if if_match:
            headers["If-Match"] = if_match
        return self.call(method, path, json=body, headers=headers)

    def call(self, method: str, path: str, *, params=None, json=None, headers=None) -> Answer:
        """The request with its retries; the last answer (status 0 if none ever came)."""
        url = self.base_url + path.lstrip("/")
        answer = Answer(status=0)
        for attempt in range(1, MAX_ATTEMPTS + 1):
            started = self.recorder.now()
            try:
                response = self.session.request(
                    method, url, params=params, json=json, headers=headers, timeout=HTTP_TIMEOUT
                )
            except requests.RequestException as exc:
                self.recorder.add(
                    Exchange(
                        started,
                        self.recorder.now(),
                        self.username,
                        method,
                        path,
                        0,
                        error=type(exc).__name__,
                        attempt=attempt,
                    )
                )
                answer = Answer(status=0, attempts=attempt)
                self._pause(self._backoff(attempt))
                continue
            answer = Answer(
                status=response.status_code,
                body=_json(response),
                headers=dict(response.headers),
                attempts=attempt,
            )
            self.recorder.add(
                Exchange(
                    started,
                    self.recorder.now(),
                    self.username,
                    method,
                    path,
                    response.status_code,
                    attempt=attempt,
                    replayed=response.headers.get("Idempotent-Replayed") == "true",
                    code=answer.code,
                    message="" if answer.ok else answer.message[:300],
                )
            )
            if response.status_code in RETRY_STATUSES:
                self._pause(self._retry_after(response) or self._backoff(attempt))
                continue
            if response.status_code == 409 and answer.code == "idempotency_in_progress":
                self._pause(self._retry_after(response) or 1.0)
                continue
            return answer
        return answer

    def _backoff(self, attempt: int) -> float:
        ceiling = min(BACKOFF_MAX, BACKOFF_BASE * 2 ** (attempt - 1))
        return self.rng.uniform(ceiling / 2, ceiling)

    @staticmethod
    def _retry_after(response: requests.Response) -> float | None:
        try:
            return min(RETRY_AFTER_MAX, float(response.headers["Retry-After"]))
        except (KeyError, ValueError):
            return None

    def _pause(self, seconds: float) -> None:
        # A client being stopped still finishes its retries (an operation is never left
        # half-asked), only faster.
        time.sleep(seconds if not self.stopping.is_set() else min(seconds, 0.5))


def _json(response: requests.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None
