"""The end invariants of a soak run, as pure functions of plain data (soak/collect.py reads
the data from the database, the sandboxes and the clients' records).

Each check returns the list of violations it found, each a sentence naming what broke; empty
means the invariant holds.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal

# Statuses a request ends in once an approval was applied to its allocations.
APPLIED_STATUSES = frozenset({"applied", "active", "expired"})
# Statuses that must not remain once the run has converged (work the portal owes).
UNFINISHED_STATUSES = frozenset({"applying", "failed"})
VIOLATIONS_SHOWN = 20


@dataclass(frozen=True)
class LineFacts:
    namespace: str  # "cluster/namespace"
    resource: str
    final: tuple  # (guarantee, cap, per_pod_max, sorted classes) the request decided
    applied_version: int | None


@dataclass(frozen=True)
class RequestFacts:
    id: int
    status: str
    kind: str
    op_id: str = ""  # the soak marker in the justification ("" if none)
    starts_later: bool = False  # a temporary grant approved to start in the future
    grant_start_failed: bool = False  # failed at its start: final, by design
    lines: tuple[LineFacts, ...] = ()


@dataclass(frozen=True)
class VersionFacts:
    namespace: str
    resource: str
    version: int
    values: tuple  # (guarantee, cap, per_pod_max, sorted classes)
    source: str


@dataclass(frozen=True)
class RequestEvent:
    seq: int
    action: str
    before_status: str | None
    after_status: str | None


@dataclass(frozen=True)
class GuaranteeChange:
    """One ``allocation.changed`` audit event: the guarantee after it, and the change it is
    part of (the lines of one request are applied, or reverted, in one transaction)."""

    seq: int
    group: str
    cluster: str
    namespace: str
    resource: str
    guarantee: Decimal


@dataclass(frozen=True)
class CreateRecord:
    op_id: str
    status: int  # the client's final answer (0: none)
    request_id: int | None
    code: str = ""  # extra.code of an error answer

    @property
    def refused(self) -> bool:
        """A 4xx that says nothing was done (not "still in progress": outcome unknown)."""
        return 400 <= self.status < 500 and self.code != "idempotency_in_progress"


@dataclass
class Result:
    name: str
    violations: list[str] = field(default_factory=list)
    checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.violations

    def as_json(self) -> dict:
        return {
            "ok": self.ok,
            "checked": self.checked,
            "violations": len(self.violations),
            "first_violations": self.violations[:VIOLATIONS_SHOWN],
        }


# --- approved means applied exactly as decided ------------------------------------------------


def check_applied_as_decided(
    requests: Iterable[RequestFacts], versions: Iterable[VersionFacts]
) -> Result:
    """Every applied request's lines point at an allocation version holding exactly the
    decided values; versions made by a request exist only for requests that were applied, and
    at most one per allocation (an approval applied twice writes two)."""
    result = Result("applied_as_decided")
    by_key = {(v.namespace, v.resource, v.version): v for v in versions}
    statuses = {}
    for request in requests:
        statuses[request.id] = request.status
        if request.status not in APPLIED_STATUSES:
            continue
        for line in request.lines:
            result.checked += 1
            where = f"request #{request.id} ({request.status}) {line.namespace} {line.resource}"
            if line.applied_version is None:
                result.violations.append(f"{where}: no allocation version was applied")
                continue
            version = by_key.get((line.namespace, line.resource, line.applied_version))
            if version is None:
                result.violations.append(
                    f"{where}: applied version {line.applied_version} does not exist"
                )
            elif version.values != line.final:
                result.violations.append(
                    f"{where}: decided {_values(line.final)} but version "
                    f"{line.applied_version} holds {_values(version.values)}"
                )
    made = Counter()
    for version in by_key.values():
        request_id = _request_of(version.source)
        if request_id is None:
            continue
        made[(request_id, version.namespace, version.resource)] += 1
        status = statuses.get(request_id)
        if status not in APPLIED_STATUSES | UNFINISHED_STATUSES:
            result.violations.append(
                f"{version.namespace} {version.resource} version {version.version} was written "
                f"by request #{request_id}, which is {status or 'missing'}"
            )
    for (request_id, namespace, resource), count in sorted(made.items()):
        if count > 1:
            result.violations.append(
                f"request #{request_id} wrote {count} versions of {namespace} {resource} "
                "(applied more than once)"
            )
    return result


def _request_of(source: str) -> int | None:
    """``request:12`` -> 12; the revert of a grant (``request:12:expired``) is not its apply."""
    kind, _, rest = source.partition(":")
    if kind != "request" or not rest.isdigit():
        return None
    return int(rest)


def _values(values: tuple) -> str:
    guarantee, cap, per_pod_max, classes = values
    return (
        f"{_num(guarantee)}/{_num(cap)} "
        f"per-pod {_num(per_pod_max) if per_pod_max is not None else '-'} "
        f"classes {','.join(classes) or 'any'}"
    )


def _num(amount: Decimal) -> str:
    """16.000 -> "16", 0.50 -> "0.5" (never "1E+1")."""
    return f"{Decimal(amount).normalize():f}"


# --- every move of a request is an allowed transition, decided once ----------------------------


def check_lifecycle(
    events: Mapping[int, list[RequestEvent]],
    final_status: Mapping[int, str],
    allowed: Mapping[str, Iterable[str]],
) -> Result:
    """Replays each request's audit events: every transition starts where the last one ended
    and is in the allowed table; a request is approved at most once; its row's status is
    where its events end."""
    result = Result("lifecycle_decided_once")
    statuses = set(allowed)
    for request_id in sorted(set(events) | set(final_status)):
        result.checked += 1
        state: str | None = None
        approved = 0
        for event in sorted(events.get(request_id, []), key=lambda e: e.seq):
            name = event.action.removeprefix("request.")
            if name == "draft" and event.before_status is None:
                if state is not None:
                    result.violations.append(
                        f"request #{request_id}: created again at event {event.seq}"
                    )
                state = "draft"
            elif name in statuses and event.before_status is not None:
                if event.before_status != state:
                    result.violations.append(
                        f"request #{request_id}: event {event.seq} moves it from "
                        f"{event.before_status} but it was {state}"
                    )
                if name not in set(allowed.get(event.before_status, ())):
                    result.violations.append(
                        f"request #{request_id}: event {event.seq} {event.before_status} → "
                        f"{name} is not an allowed transition"
                    )
                state = name
                approved += name == "approved"
        if approved > 1:
            result.violations.append(f"request #{request_id}: approved {approved} times")
        final = final_status.get(request_id)
        if final is None:
            result.violations.append(f"request #{request_id}: audited but missing from the table")
        elif final != state:
            result.violations.append(
                f"request #{request_id}: status {final} but its audit events end at {state}"
            )
    return result


# --- no capacity over-committed ---------------------------------------------------------------


def check_capacity(
    capacity: Mapping[tuple[str, str], Decimal],
    changes: Iterable[GuaranteeChange],
    current: Mapping[tuple[str, str], Decimal] | None = None,
) -> Result:
    """Replays every guarantee change in audit order, a change (``group``: one transaction) at
    a time: the sum of the guarantees of a cluster and resource never exceeds its capacity
    after any commit; and the allocations as they are now (``current``: sum per cluster and
    resource) do not either."""
    result = Result("capacity_never_overcommitted")
    guarantees: dict[tuple[str, str, str], Decimal] = {}
    ordered = sorted(changes, key=lambda c: c.seq)
    for index, change in enumerate(ordered):
        guarantees[(change.cluster, change.namespace, change.resource)] = change.guarantee
        last_of_group = index + 1 == len(ordered) or ordered[index + 1].group != change.group
        if not last_of_group:
            continue
        result.checked += 1
        sums: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
        for (cluster, _, resource), guarantee in guarantees.items():
            sums[(cluster, resource)] += guarantee
        for key, total in sorted(sums.items()):
            limit = capacity.get(key)
            if limit is not None and total > limit:
                result.violations.append(
                    f"after event {change.seq}: guarantees on {key[0]} {key[1]} add up to "
                    f"{_num(total)} of capacity {_num(limit)}"
                )
    for key, total in sorted((current or {}).items()):
        result.checked += 1
        limit = capacity.get(key)
        if limit is not None and total > limit:
            result.violations.append(
                f"now: guarantees on {key[0]} {key[1]} add up to {_num(total)} "
                f"of capacity {_num(limit)}"
            )
    return result


# --- no request lost, none made twice -----------------------------------------------------------


def check_no_request_lost(
    creates: Iterable[CreateRecord],
    markers: Mapping[str, list[int]],
    seen: Mapping[int, str],
    db_status: Mapping[int, str],
    allowed: Mapping[str, Iterable[str]],
) -> Result:
    """Every create a client was told succeeded made exactly that one request; a create left
    without an answer made at most one; every marked request comes from a known create; every
    request a client saw exists, in the status it saw or one reachable from it."""
    result = Result("no_request_lost_or_duplicated")
    known = set()
    for op in creates:
        result.checked += 1
        known.add(op.op_id)
        made = sorted(markers.get(op.op_id, []))
        if 200 <= op.status < 300:
            if op.request_id not in db_status:
                result.violations.append(
                    f"{op.op_id}: the client got request #{op.request_id}, "
                    "missing from the database"
                )
            elif made != [op.request_id]:
                result.violations.append(
                    f"{op.op_id}: the client got request #{op.request_id}, the database has "
                    f"{_ids(made)} for it"
                )
        elif len(made) > 1:
            result.violations.append(
                f"{op.op_id}: answered {op.status or 'nothing'}, made {_ids(made)} (duplicates)"
            )
        elif made and op.refused:
            result.violations.append(
                f"{op.op_id}: refused with {op.status}, yet made request #{made[0]}"
            )
        if op.code == "idempotency_in_progress":
            # Every retry waited for an owner that never finished: the key is stuck.
            result.violations.append(
                f"{op.op_id}: its key was still 'in progress' after every retry (made {_ids(made)})"
            )
    for op_id, ids in sorted(markers.items()):
        if op_id not in known:
            result.violations.append(f"{_ids(ids)} carry {op_id}, which no client sent")
    reachable = _reachability(allowed)
    for request_id, status in sorted(seen.items()):
        result.checked += 1
        now = db_status.get(request_id)
        if now is None:
            result.violations.append(
                f"request #{request_id}: a client saw it {status}; missing from the database"
            )
        elif now != status and now not in reachable.get(status, set()):
            result.violations.append(
                f"request #{request_id}: a client saw it {status}, now it is {now} "
                "(not reachable from what the client was told)"
            )
    return result


def _ids(ids: list[int]) -> str:
    return ", ".join(f"#{i}" for i in ids) or "nothing"


def _reachability(allowed: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    reach: dict[str, set[str]] = {}
    for start in allowed:
        seen: set[str] = set()
        todo = list(allowed[start])
        while todo:
            state = todo.pop()
            if state not in seen:
                seen.add(state)
                todo.extend(allowed.get(state, ()))
        reach[start] = seen
    return reach


# --- what the clusters hold is what the database says ----------------------------------------


def check_cluster_state(
    cluster: str,
    desired: list[dict],
    live: Mapping[tuple[str, str, str, str], dict],
) -> Result:
    """Every desired object (rendered from the database by the portal's own render code) is in
    the cluster with the fields the portal owns equal; no other object the portal manages is
    left there (namespaces excepted: never deleted)."""
    from quotas.kube.diff import differences, live_view, owned
    from quotas.kube.objects import ObjectKey

    result = Result(f"cluster_matches_database:{cluster}")
    wanted = set()
    for obj in desired:
        key = ObjectKey.of(obj)
        wanted.add(key)
        result.checked += 1
        found = live.get(key)
        name = f"{cluster}: {key[1]} {key[2] + '/' if key[2] else ''}{key[3]}"
        if found is None:
            result.violations.append(f"{name} is missing")
            continue
        view = owned(obj)
        changes = differences(live_view(found, view), view)
        if changes:
            shown = "; ".join(f"{c['path']}: {c['old']!r} ≠ {c['new']!r}" for c in changes[:3])
            result.violations.append(f"{name} differs (live ≠ desired): {shown}")
    for key in sorted(set(live) - wanted):
        if key[1] != "Namespace":
            result.violations.append(
                f"{cluster}: {key[1]} {key[2] + '/' if key[2] else ''}{key[3]} is left over"
            )
    return result


# --- no 5xx to clients outside the fault windows that excuse them ------------------------------


def check_no_5xx(
    exchanges: Iterable, windows: Iterable[tuple[float, float, str]]
) -> tuple[Result, Counter]:
    """Every 5xx answer (``status`` ≥ 500) must overlap an excusing window (start, end, what):
    the Redis restart, and the instant of a database drop (a request in flight then loses its
    connection; one started after it must not fail). Returns the result and how many 5xx each
    kind of window excused."""
    result = Result("no_5xx_outside_fault_windows")
    windows = list(windows)
    excused: Counter = Counter()
    for exchange in exchanges:
        result.checked += 1
        if exchange.status < 500:
            continue
        cover = next(
            (
                what
                for start, end, what in windows
                if exchange.started <= end and exchange.ended >= start
            ),
            None,
        )
        if cover is not None:
            excused[cover] += 1
            continue
        result.violations.append(
            f"{exchange.status} at {exchange.started:.1f}-{exchange.ended:.1f} s: "
            f"{exchange.method} {exchange.path} by {exchange.user} (attempt {exchange.attempt})"
        )
    return result, excused


# --- nothing left owed once converged ---------------------------------------------------------


def check_converged(
    unfinished_syncs: Iterable[str], running_runs: Iterable[str], requests: Iterable[RequestFacts]
) -> Result:
    """After the clients stopped and the faults ended: no pending or failed sync, no sync run
    left "running" by a worker that died, no approved request still applying or failed (a grant
    that failed at its start is final), no permanent request left approved but unapplied."""
    result = Result("converged")
    for sync in unfinished_syncs:
        result.violations.append(f"sync not done: {sync}")
    for run in running_runs:
        result.violations.append(f"sync run still running: {run}")
    for request in requests:
        result.checked += 1
        if request.status in UNFINISHED_STATUSES and not request.grant_start_failed:
            result.violations.append(f"request #{request.id} is still {request.status}")
        elif request.status == "approved" and not request.starts_later:
            result.violations.append(f"request #{request.id} is approved but not applied")
    return result
