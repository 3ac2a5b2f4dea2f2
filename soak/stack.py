"""The processes and stores of one soak run: its own redis-server, a throw-away PostgreSQL
database, sandbox API servers, gunicorn, Celery workers and beat, all on loopback.

Every child runs in its own process group (so a SIGKILL takes a whole gunicorn or worker) and
gets SIGTERM if the harness dies; ``Stack.close`` stops them all and drops the database, and is
safe to call more than once.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode, urlsplit, urlunsplit

from common.processes import die_with_parent

STOP_GRACE_SECONDS = 10.0
HARNESS_APP = "soak-harness"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(check: Callable[[], bool], *, timeout: float, what: str, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except Exception:  # noqa: S110 - not up yet: try again until the deadline
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready after {timeout:.0f} s")
        time.sleep(every)


@dataclass
class Child:
    """One long-running process of the stack; restartable (a killed worker, a stopped Redis)."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    cwd: Path
    launcher: ThreadPoolExecutor | None = None
    closed: threading.Event = field(default_factory=threading.Event)
    process: subprocess.Popen | None = None
    # Set while it is being stopped or killed on purpose (a fault, the end of the run).
    going_down: bool = False
    starts: int = 0
    exits: list[int] = field(default_factory=list)

    def start(self) -> Child:
        # PR_SET_PDEATHSIG fires when the *thread* that forked the child ends: a worker
        # restarted by the fault thread would die with it. One long-lived thread forks them all.
        if self.launcher is not None:
            return self.launcher.submit(self._spawn).result()
        return self._spawn()

    def _spawn(self) -> Child:
        if self.closed.is_set():
            raise RuntimeError(f"{self.name}: the stack is closed")
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.argv,
                env=self.env,
                cwd=self.cwd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        self.going_down = False
        self.starts += 1
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, sig: int) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)

    def kill(self) -> None:
        """SIGKILL the whole process group and reap it (a crash, not a shutdown)."""
        if self.process is None:
            return
        self.going_down = True
        self.signal(signal.SIGKILL)
        self.exits.append(self.process.wait())
        self.process = None

    def stop(self, grace: float = STOP_GRACE_SECONDS) -> None:
        if self.process is None:
            return
        self.going_down = True
        if self.process.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                self.process.wait()
        else:
            # The leader is gone; make sure nothing of its group lingers (gunicorn workers).
            self.signal(signal.SIGKILL)
        self.exits.append(self.process.returncode)
        self.process = None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def with_database(url: str, name: str, **query: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", urlencode(query), ""))


class Database:
    """A fresh PostgreSQL database ``soak_<random>`` on the server of ``server_url``."""

    def __init__(self, server_url: str):
        self.server_url = server_url
        self.name = f"soak_{secrets.token_hex(4)}"
        self.created = False

    def _admin(self):
        import psycopg

        return psycopg.connect(
            with_database(self.server_url, "postgres", application_name=HARNESS_APP),
            autocommit=True,
            connect_timeout=5,
        )

    def url(self, application_name: str) -> str:
        """The database's URL; each component names itself (pg_stat_activity shows who is who)."""
        return with_database(self.server_url, self.name, application_name=application_name)

    def create(self) -> None:
        with self._admin() as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        self.created = True

    def drop(self) -> None:
        if not self.created:
            return
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        self.created = False

    def terminate_backends(self) -> list[str]:
        """Drop every connection to the soak database but the harness's own (the fault of a
        database failover or a proxy restart); returns the application names of those cut."""
        with self._admin() as conn:
            rows = conn.execute(
                "SELECT application_name, pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid() AND application_name <> %s",
                (self.name, HARNESS_APP),
            ).fetchall()
        return sorted(name or "?" for name, done in rows if done)


class Stack:
    """Every process of the run by name, stopped in a safe order by ``close``."""

    STOP_ORDER = ("web", "beat", "worker", "sandbox", "redis")

    def __init__(self, *, workdir: Path, database: Database):
        self.workdir = workdir
        self.database = database
        self.children: dict[str, Child] = {}
        self.closing = threading.Event()
        self.launcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="soak-launcher")

    def add(self, child: Child) -> Child:
        child.launcher = self.launcher
        child.closed = self.closing
        self.children[child.name] = child
        return child

    def dead(self) -> list[str]:
        """Children that should be running but exited on their own."""
        dead = []
        for name, child in self.children.items():
            process = child.process  # another thread may be restarting it
            if not child.going_down and process is not None and process.poll() is not None:
                dead.append(name)
        return dead

    def close(self) -> None:
        if self.closing.is_set():
            return
        self.closing.set()  # no (re)start from now on, e.g. by a fault under way
        ordered = sorted(
            self.children.values(),
            key=lambda c: next(
                (i for i, prefix in enumerate(self.STOP_ORDER) if c.name.startswith(prefix)),
                len(self.STOP_ORDER),
            ),
        )
        for child in ordered:
            with contextlib.suppress(Exception):
                child.stop()
        self.launcher.shutdown(wait=True, cancel_futures=True)
        for child in ordered:  # one a restart spawned while the others were stopping
            with contextlib.suppress(Exception):
                child.stop()
        with contextlib.suppress(Exception):
            self.database.drop()
