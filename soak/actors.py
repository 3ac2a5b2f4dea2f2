"""Simulated people: team leads ask for quota (create, revise, submit, withdraw, rebase) and
platform admins decide (approve, approve with changed amounts, second approvals, reject, send
back, revoke scheduled grants), each in its own thread, through the REST API only.

Every create carries a marker (``soak <op id>``) in its justification, so the end checks can
tell which requests each operation made: one, or none when it never got an answer, never two.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from soak.client import Answer, ApiClient

MARKER = "soak "


@dataclass
class CreateOp:
    """One logical create (with its retries): what the client got back."""

    op_id: str
    user: str
    team: str
    status: int = 0  # the final answer's status, 0 if none
    code: str = ""  # extra.code of a final error answer
    request_id: int | None = None


@dataclass
class OpLog:
    """What the clients did and saw, shared by every actor thread."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    creates: list[CreateOp] = field(default_factory=list)
    # request id -> the last status a client saw in an answer, and when (run seconds)
    seen: dict[int, tuple[str, float]] = field(default_factory=dict)
    actions: Counter = field(default_factory=Counter)  # "approve 200", "create 400", ...
    _next: int = 0

    def new_op(self, user: str, team: str) -> CreateOp:
        with self.lock:
            self._next += 1
            op = CreateOp(op_id=f"op-{self._next:06d}", user=user, team=team)
            self.creates.append(op)
            return op

    def count(self, action: str, answer: Answer) -> None:
        with self.lock:
            self.actions[f"{action} {answer.status or 'no answer'}"] += 1

    def saw(self, body: Any, when: float) -> None:
        """Remember the status of every request in an answer (one, or a page of them)."""
        items = body.get("results") if isinstance(body, dict) and "results" in body else [body]
        with self.lock:
            for item in items or []:
                if isinstance(item, dict) and "id" in item and "status" in item:
                    self.seen[int(item["id"])] = (item["status"], when)


class Actor(threading.Thread):
    """A loop of steps until told to stop; a step that raises is counted, never fatal."""

    pause = (0.3, 1.2)

    def __init__(self, *, api: ApiClient, log: OpLog, stop: threading.Event, seed: int):
        super().__init__(name=f"soak-{api.username}", daemon=True)
        self.api = api
        self.log = log
        self.stop_event = stop
        self.rng = random.Random(seed)
        self.errors: Counter = Counter()

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                self.step()
            except Exception as exc:  # a bug in the actor must not end the soak silently
                self.errors[f"{type(exc).__name__}: {exc}"[:200]] += 1
            self.stop_event.wait(self.rng.uniform(*self.pause))

    def step(self) -> None:
        raise NotImplementedError

    def _answered(self, action: str, answer: Answer) -> Answer:
        self.log.count(action, answer)
        if answer.ok:
            self.log.saw(answer.body, self.api.recorder.now())
        return answer


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat()


class Lead(Actor):
    """A team lead: asks for more or less quota on the team's namespaces, revises what comes
    back, submits drafts, withdraws now and then."""

    def __init__(self, *, team: str, namespaces, capacity, **kwargs):
        super().__init__(**kwargs)
        self.team = team
        self.namespaces = namespaces  # [(cluster, namespace, resource)]
        self.capacity = capacity  # (cluster, resource) -> Decimal

    def step(self) -> None:
        roll = self.rng.random()
        if roll < 0.5:
            self.create()
        elif roll < 0.75:
            self.revise()
        elif roll < 0.85:
            self.withdraw()
        else:
            self._answered("list", self.api.get("requests/", team=self.team, page_size=50))

    # -- asking ---------------------------------------------------------------------------

    def _current(self) -> dict[tuple[str, str, str], dict]:
        answer = self.api.get("allocations/", team=self.team, page_size=100)
        if not answer.ok:
            return {}
        return {
            (a["cluster"], a["namespace"], a["resource"]): a
            for a in answer.body.get("results", [])
            if isinstance(a, dict)
        }

    def _line(self, cluster: str, namespace: str, resource: str, current: dict | None) -> dict:
        g0 = Decimal(str(current["guarantee"])) if current else Decimal(0)
        c0 = Decimal(str(current["cap"])) if current else Decimal(0)
        capacity = self.capacity[(cluster, resource)]
        share = capacity / 2  # the default largest share of one cap
        roll = self.rng.random()
        if roll < 0.25:  # give some back
            g = max(Decimal(0), g0 - self.rng.randint(1, 2))
            c = max(g, c0 - self.rng.randint(0, 2))
        elif roll < 0.5:  # a small increase: may be approved at once
            g, c = g0 + 1, c0 + 1
        elif roll < 0.93:  # a real increase: an admin (or two) decides
            g = g0 + self.rng.randint(2, 5)
            c = max(c0, g + self.rng.randint(0, 4))
        else:  # more than the cluster has: refused with the rule named
            g = capacity + 1
            c = g
        if roll < 0.93:
            c = min(c, share)
            g = min(g, c)
        line = {"cluster": cluster, "namespace": namespace, "resource": resource}
        line["guarantee"], line["cap"] = str(g), str(c)
        if current and current.get("per_pod_max") and Decimal(str(current["per_pod_max"])) > c:
            line["per_pod_max"] = None
        return line

    def _lines(self) -> list[dict]:
        current = self._current()
        chosen = self.rng.sample(self.namespaces, k=1 if self.rng.random() < 0.8 else 2)
        return [self._line(c, n, r, current.get((c, n, r))) for c, n, r in chosen]

    def create(self) -> None:
        lines = self._lines()
        op = self.log.new_op(self.api.username, self.team)
        body: dict[str, Any] = {
            "team": self.team,
            "justification": f"{MARKER}{op.op_id}: load of the next sprint",
            "lines": lines,
            "submit": self.rng.random() < 0.75,
        }
        if self.rng.random() < 0.15:
            now = datetime.now(UTC)
            body["kind"] = "temporary"
            start = now + timedelta(seconds=self.rng.randint(10, 30))
            if self.rng.random() < 0.3:
                body["starts_at"] = _iso(start)
            body["ends_at"] = _iso(start + timedelta(seconds=self.rng.randint(40, 120)))
        answer = self._answered("create", self.api.write("POST", "requests/", body))
        op.status, op.code = answer.status, answer.code
        if answer.ok and isinstance(answer.body, dict):
            op.request_id = int(answer.body["id"])

    # -- following up -----------------------------------------------------------------------

    def _mine(self, status: str) -> list[dict]:
        answer = self.api.get("requests/", team=self.team, status=status, page_size=100)
        if not answer.ok:
            return []
        self.log.saw(answer.body, self.api.recorder.now())
        return [r for r in answer.body.get("results", []) if r["requested_by"] == self.api.username]

    def revise(self) -> None:
        """Work on a draft or a request sent back: new amounts, submitted at once."""
        waiting = self._mine("changes_requested") + self._mine("draft")
        if not waiting:
            return
        request = self.rng.choice(waiting)
        detail = self.api.get(f"requests/{request['id']}/")
        if not detail.ok:
            return
        current = self._current()
        lines = [
            self._line(
                line["cluster"],
                line["namespace"],
                line["resource"],
                current.get((line["cluster"], line["namespace"], line["resource"])),
            )
            for line in detail.body["lines"]
        ]
        answer = self._answered(
            "revise",
            self.api.write(
                "PATCH",
                f"requests/{request['id']}/",
                {"lines": lines, "submit": True},
                if_match=detail.headers.get("ETag"),
            ),
        )
        if answer.status == 409 and "changes" in (answer.body or {}).get("extra", {}):
            # Written against an allocation that moved on: rebase, then try again later.
            self._answered("rebase", self.api.write("POST", f"requests/{request['id']}/rebase/"))

    def withdraw(self) -> None:
        waiting = self._mine("submitted")
        if not waiting:
            return
        request = self.rng.choice(waiting)
        self._answered(
            "withdraw",
            self.api.write(
                "POST", f"requests/{request['id']}/withdraw/", {"comment": "not needed after all"}
            ),
        )


class Admin(Actor):
    """A platform admin: works through the waiting requests, deciding each with If-Match."""

    pause = (0.3, 1.0)

    def step(self) -> None:
        if self.rng.random() < 0.05:
            self.revoke_scheduled()
            return
        answer = self.api.get("requests/", status="submitted", page_size=100)
        if not answer.ok:
            return
        self.log.saw(answer.body, self.api.recorder.now())
        waiting = [
            r
            for r in answer.body.get("results", [])
            if self.api.username not in {a["admin"] for a in r.get("approvals", [])}
        ]
        if not waiting:
            return
        self.decide(self.rng.choice(waiting)["id"])

    def decide(self, request_id: int) -> None:
        detail = self.api.get(f"requests/{request_id}/")
        if not detail.ok or detail.body.get("status") != "submitted":
            return
        request, etag = detail.body, detail.headers.get("ETag")
        fits = (request.get("fits_plan") or {}).get("fits", True)
        roll = self.rng.random()
        path = f"requests/{request_id}/"
        if not fits:
            action = "reject" if roll < 0.5 else "changes"
            body = {"comment": "does not fit the plan any more"}
        elif roll < 0.6:
            action, body = "approve", {"comment": "ok"}
        elif roll < 0.75:
            action = "approve"
            body = {"comment": "a little less", "decisions": self._less(request)}
        elif roll < 0.88:
            action, body = "changes", {"comment": "split it per namespace, please"}
        else:
            action, body = "reject", {"comment": "not this quarter"}
        answer = self._answered(
            action if "decisions" not in body else "approve-modified",
            self.api.write("POST", f"{path}{action}/", body, if_match=etag),
        )
        if answer.status == 409 and "changes" in (answer.body or {}).get("extra", {}):
            self._answered("rebase", self.api.write("POST", f"{path}rebase/"))

    def _less(self, request: dict) -> list[dict]:
        """Decided values one unit under the requested guarantee (the cap as asked)."""
        decisions = []
        for line in request["lines"]:
            requested = line["requested"]
            guarantee = max(Decimal(0), Decimal(str(requested["guarantee"])) - 1)
            decisions.append(
                {"line": line["id"], "guarantee": str(guarantee), "cap": str(requested["cap"])}
            )
        return decisions

    def revoke_scheduled(self) -> None:
        answer = self.api.get("requests/", status="approved", kind="temporary", page_size=100)
        if not answer.ok:
            return
        self.log.saw(answer.body, self.api.recorder.now())
        scheduled = answer.body.get("results", [])
        if scheduled:
            request = self.rng.choice(scheduled)
            self._answered(
                "revoke",
                self.api.write(
                    "POST", f"requests/{request['id']}/revoke/", {"comment": "capacity needed"}
                ),
            )
