"""``python -m soak``: start the whole portal on loopback, drive it through the REST API with
faults for ``--seconds`` (``SOAK_SECONDS``, default 300), wait for it to converge, check the
end invariants, print a summary, write ``var/soak/results.json``; exit 1 if an invariant fails.

Needs ``redis-server`` on the PATH and a PostgreSQL server (``SOAK_DATABASE_URL``, else
``DATABASE_URL`` when it is PostgreSQL, else ``postgres://postgres@127.0.0.1:5432/``) where it
may create and drop a database. Everything it starts is stopped, and the database dropped,
however the run ends (Ctrl-C included); the logs stay in the run's directory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import requests

from soak import collect
from soak import invariants as inv
from soak.actors import Admin, Lead, OpLog
from soak.client import ApiClient, Recorder
from soak.dataset import seed
from soak.faults import FaultInjector, SandboxControl
from soak.stack import Child, Database, Stack, free_port, wait_until

ROOT = Path(__file__).resolve().parents[1]
# Short enough that recovery fits a run of minutes (the defaults are minutes).
PORTAL_ENV = {
    "KUBE_REQUEST_TIMEOUT": "3",
    "SYNC_LEASE_SECONDS": "15",
    "SYNC_PENDING_REDRIVE_SECONDS": "10",
    "SYNC_RECONCILE_SECONDS": "30",
    "AUDIT_ANCHOR_SECONDS": "10",
    "USAGE_COLLECT_SECONDS": "30",
    "API_THROTTLE_ADDRESS_RATE": "3000/min",
    "EMAIL_BACKEND": "django.core.mail.backends.dummy.EmailBackend",
    "LOG_LEVEL": "INFO",
    "PYTHONUNBUFFERED": "1",
}
# A run started in a live one's name leaves these to the soak's own values.
INHERITED_OUT = re.compile(r"^(DATABASE_URL|CELERY_|CACHE_URL|KUBE_|SYNC_|AUDIT_|PORTAL_VAR_DIR)")
STUCK_RUN_SECONDS = 60.0
RETRY_LOG = re.compile(r"Task quotas\.sync_cluster\[[^\]]+\] retry:")


class Interrupted(Exception):
    pass


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(prog="python -m soak", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seconds",
        type=float,
        default=float(env("SOAK_SECONDS", "300")),
        help="length of the load and faults (SOAK_SECONDS, default 300)",
    )
    parser.add_argument(
        "--teams",
        type=int,
        default=int(env("SOAK_TEAMS", "6")),
        help="teams, each with a simulated lead (SOAK_TEAMS, default 6)",
    )
    parser.add_argument(
        "--admins",
        type=int,
        default=int(env("SOAK_ADMINS", "3")),
        help="simulated platform admins (SOAK_ADMINS, default 3; two-admin approvals need 2)",
    )
    parser.add_argument("--workers", type=int, default=2, help="Celery workers (default 2)")
    parser.add_argument(
        "--seed",
        type=int,
        default=int(env("SOAK_SEED", "0")) or None,
        help="seed of the simulated people (SOAK_SEED; default random, printed)",
    )
    parser.add_argument(
        "--converge-timeout",
        type=float,
        default=float(env("SOAK_CONVERGE_SECONDS", "240")),
        help="how long to wait for convergence after the load (SOAK_CONVERGE_SECONDS, 240)",
    )
    parser.add_argument(
        "--results",
        type=Path,
        default=ROOT / "var" / "soak" / "results.json",
        help="where the results go (default var/soak/results.json)",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="logs, anchors and every client exchange (default var/soak/run-<time>/)",
    )
    return parser.parse_args(argv)


def _server_url() -> str:
    for name in ("SOAK_DATABASE_URL", "DATABASE_URL"):
        url = os.environ.get(name, "")
        if url.startswith(("postgres://", "postgresql://")):
            return url
    return "postgres://postgres@127.0.0.1:5432/postgres"


def say(message: str) -> None:
    print(f"[soak {datetime.now(UTC):%H:%M:%S}] {message}", flush=True)


class Soak:
    def __init__(self, options: argparse.Namespace):
        self.options = options
        self.seed = options.seed or random.SystemRandom().randrange(1, 2**31)
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        self.workdir = (options.workdir or ROOT / "var" / "soak" / f"run-{stamp}").resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.database = Database(_server_url())
        self.stack = Stack(workdir=self.workdir, database=self.database)
        self.redis_port = free_port()
        self.token = secrets.token_urlsafe(24)
        self.token_file = self.workdir / "sandbox.token"
        self.anchor_file = self.workdir / "audit-anchors.jsonl"
        self.mac_key = secrets.token_urlsafe(36)
        self.secret_key = secrets.token_urlsafe(48)
        self.sandbox_urls: dict[str, str] = {}
        self.web_url = ""
        self.started = time.monotonic()
        self.recorder = Recorder(self.started)
        self.oplog = OpLog()
        self.actors: list = []
        self.stop_actors = threading.Event()
        self.injector: FaultInjector | None = None
        self.control: SandboxControl | None = None
        self.results: dict = {"seed": self.seed, "seconds": options.seconds}

    # -- environment -------------------------------------------------------------------------

    def env(self, component: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not INHERITED_OUT.match(k)}
        env.update(PORTAL_ENV)
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "portal.settings",
                "DJANGO_SECRET_KEY": self.secret_key,
                "DATABASE_URL": self.database.url(f"soak-{component}"),
                "CELERY_BROKER_URL": f"redis://127.0.0.1:{self.redis_port}/0",
                "CACHE_URL": f"redis://127.0.0.1:{self.redis_port}/1",
                "PORTAL_VAR_DIR": str(self.workdir / "var"),
                "KUBE_SANDBOX_TOKEN_FILE": str(self.token_file),
                "AUDIT_MAC_KEY": self.mac_key,
                "AUDIT_ANCHOR_FILE": str(self.anchor_file),
            }
        )
        return env

    def child(self, name: str, argv: list[str], component: str | None = None) -> Child:
        return self.stack.add(
            Child(
                name=name,
                argv=argv,
                env=self.env(component or name.split(":")[0]),
                log=self.workdir / f"{name.replace(':', '-')}.log",
                cwd=ROOT,
            )
        )

    # -- starting ------------------------------------------------------------------------------

    def start_redis(self) -> None:
        if shutil.which("redis-server") is None:
            raise SystemExit("soak: redis-server is not on the PATH (apt-get install redis-server)")
        self.redis = self.child(
            "redis",
            [
                "redis-server",
                "--port",
                str(self.redis_port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
        ).start()
        wait_until(self.redis_ready, timeout=20, what="redis-server")

    def redis_ready(self) -> bool:
        import redis

        client = redis.Redis(port=self.redis_port, socket_timeout=1)
        try:
            return bool(client.ping())
        finally:
            client.close()

    def start_sandboxes(self, clusters: list[str]) -> None:
        self.token_file.write_text(self.token + "\n")
        self.token_file.chmod(0o600)
        for name in clusters:
            port = free_port()
            self.child(
                f"sandbox:{name}",
                [
                    sys.executable,
                    "-m",
                    "kubesandbox",
                    "--port",
                    str(port),
                    "--token-file",
                    str(self.token_file),
                    "--allow-faults",
                ],
            ).start()
            self.sandbox_urls[name] = f"http://127.0.0.1:{port}"
        for name, url in self.sandbox_urls.items():
            wait_until(
                lambda url=url: requests.get(f"{url}/healthz", timeout=1).ok,
                timeout=30,
                what=f"sandbox of {name}",
            )

    def setup_django(self) -> None:
        os.environ.update(self.env("harness"))
        os.environ["DATABASE_URL"] = self.database.url("soak-harness")
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", interactive=False, verbosity=0)

    def yunikorn_namespaces(self) -> None:
        """The namespace YuniKorn's installer makes, on the clusters that run it."""
        from quotas.models import Cluster

        for cluster in Cluster.objects.filter(yunikorn_enabled=True):
            answer = requests.post(
                f"{self.sandbox_urls[cluster.name]}/api/v1/namespaces",
                json={
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": cluster.yunikorn_namespace},
                },
                headers={"Authorization": f"Bearer {self.token}"},
                timeout=10,
            )
            if answer.status_code not in (201, 409):
                answer.raise_for_status()

    def start_portal(self) -> None:
        port = free_port()
        self.web_url = f"http://127.0.0.1:{port}"
        python = sys.executable
        self.child(
            "web",
            [
                python,
                "-m",
                "gunicorn",
                "portal.wsgi",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                "2",
                "--threads",
                "4",
                "--timeout",
                "60",
                "--graceful-timeout",
                "5",
                "--access-logfile",
                "-",
                "--no-control-socket",
            ],
        ).start()
        self.workers: dict[str, Child] = {}
        for i in range(1, self.options.workers + 1):
            name = f"w{i}"
            self.workers[name] = self.child(
                f"worker:{name}",
                [
                    python,
                    "-m",
                    "celery",
                    "-A",
                    "portal",
                    "worker",
                    "--pool",
                    "solo",
                    "--hostname",
                    f"{name}@soak",
                    "--without-gossip",
                    "--without-mingle",
                    "--loglevel",
                    "INFO",
                ],
                component=f"worker-{name}",
            ).start()
        self.beat = self.child(
            "beat",
            [
                python,
                "-m",
                "celery",
                "-A",
                "portal",
                "beat",
                "--loglevel",
                "INFO",
                "--scheduler",
                "django_celery_beat.schedulers:DatabaseScheduler",
                "--pidfile",
                "",
            ],
        ).start()
        wait_until(
            lambda: requests.get(f"{self.web_url}/healthz", timeout=2).ok, timeout=60, what="web"
        )
        for worker in self.workers.values():
            wait_until(
                lambda w=worker: " ready." in w.log.read_text(errors="replace"),
                timeout=60,
                what=worker.name,
            )

    # -- convergence ---------------------------------------------------------------------------

    def cluster_results(self) -> list[inv.Result]:
        from django.conf import settings

        results = []
        for name, (url, desired) in collect.desired_objects().items():
            live = collect.live_objects(url, self.token, settings.KUBE_MANAGED_BY, name)
            results.append(inv.check_cluster_state(name, desired, live))
        return results

    def converged(self, *, starts_owed: bool = False) -> tuple[bool, str]:
        """Nothing owed now. With ``starts_owed`` (while beat still runs), a temporary grant
        approved to start later is owed too: beat starts it, and once beat is stopped nothing
        would, so the settling below must not begin before every such start is behind us."""
        from django.db import close_old_connections

        close_old_connections()
        syncs = collect.unfinished_syncs()
        if syncs:
            return False, f"{len(syncs)} syncs not done"
        requests_ = collect.requests_facts()
        owed = inv.check_converged([], [], requests_)
        if not owed.ok:
            return False, owed.violations[0]
        if starts_owed:
            later = [r.id for r in requests_ if r.status == "approved" and r.starts_later]
            if later:
                return False, f"request #{later[0]} starts later ({len(later)} grants to start)"
        for result in self.cluster_results():
            if not result.ok:
                return False, result.violations[0]
        return True, "converged"

    def wait_converged(
        self, timeout: float, what: str, *, starts_owed: bool = False
    ) -> float | None:
        started = time.monotonic()
        last = ""
        while time.monotonic() - started < timeout:
            try:
                ok, why = self.converged(starts_owed=starts_owed)
            except Exception as exc:  # a read during a restart: try again
                ok, why = False, f"{type(exc).__name__}: {exc}"
            if ok:
                return time.monotonic() - started
            if why != last:
                say(f"{what}: waiting ({why})")
                last = why
            time.sleep(2)
        return None

    # -- the run -------------------------------------------------------------------------------

    def start_load(self, data) -> None:
        for i, person in enumerate(data.leads):
            api = ApiClient(
                base_url=self.web_url,
                username=person.username,
                token=person.token,
                recorder=self.recorder,
                rng=random.Random(self.seed + i),
            )
            self.actors.append(
                Lead(
                    api=api,
                    log=self.oplog,
                    stop=self.stop_actors,
                    seed=self.seed * 31 + i,
                    team=person.team,
                    namespaces=data.namespaces[person.team],
                    capacity=data.capacity,
                )
            )
        for i, person in enumerate(data.admins):
            api = ApiClient(
                base_url=self.web_url,
                username=person.username,
                token=person.token,
                recorder=self.recorder,
                rng=random.Random(self.seed + 1000 + i),
            )
            self.actors.append(
                Admin(api=api, log=self.oplog, stop=self.stop_actors, seed=self.seed * 37 + i)
            )
        for actor in self.actors:
            actor.start()

    def stop_load(self) -> None:
        self.stop_actors.set()
        for actor in self.actors:
            actor.api.stopping.set()
        for actor in self.actors:
            actor.join(timeout=120)
            actor.api.close()

    def run(self) -> int:
        from soak.dataset import CLUSTERS

        say(f"work directory {self.workdir}; seed {self.seed}")
        self.database.create()
        say(f"database {self.database.name} created")
        self.start_redis()
        self.start_sandboxes(list(CLUSTERS))
        self.setup_django()
        data = seed(
            teams=self.options.teams, admins=self.options.admins, sandbox_urls=self.sandbox_urls
        )
        self.yunikorn_namespaces()
        self.start_portal()
        say(f"portal at {self.web_url}; {len(self.workers)} workers, beat, Redis {self.redis_port}")
        first = self.wait_converged(120, "first sync")
        if first is None:
            raise RuntimeError("the first sync of the clusters did not converge in 120 s")
        say(f"clusters in sync after {first:.1f} s; load and faults for {self.options.seconds:g} s")

        self.started = time.monotonic()
        self.recorder.started = self.started
        self.control = SandboxControl(list(self.sandbox_urls.values()), self.token)
        self.injector = FaultInjector(
            seconds=self.options.seconds,
            now=self.recorder.now,
            sandboxes=self.control,
            kube_timeout=float(PORTAL_ENV["KUBE_REQUEST_TIMEOUT"]),
            workers=self.workers,
            redis=self.redis,
            redis_ready=self.redis_ready,
            database=self.database,
            lease_holders=collect.lease_holders,
        )
        self.start_load(data)
        self.injector.start()
        deadline = self.started + self.options.seconds
        unexpected: list[str] = []
        while time.monotonic() < deadline:
            time.sleep(1)
            unexpected += [n for n in self.stack.dead() if n not in unexpected]
        say("load over: stopping the clients and the faults")
        self.stop_load()
        self.injector.stop()
        self.injector.join(timeout=120)
        self.control.clear()
        unexpected += [n for n in self.stack.dead() if n not in unexpected]
        load_seconds = self.recorder.now()

        # The load's last temporary grants start up to half a minute after it: beat starts
        # them, so convergence waits for their starts before beat is stopped.
        converge = self.wait_converged(
            self.options.converge_timeout, "converging", starts_owed=True
        )
        say(
            f"converged after {converge:.1f} s"
            if converge is not None
            else f"NOT converged after {self.options.converge_timeout:.0f} s"
        )
        # Nothing new from beat while the invariants are read (a grant ending meanwhile).
        self.beat.stop()
        settled = self.wait_converged(60, "settling without beat")
        self.results.update(
            load_seconds=round(load_seconds, 1),
            converge_seconds=None if converge is None else round(converge, 1),
            settled=settled is not None,
            first_sync_seconds=round(first, 1),
            processes_died=unexpected,
        )
        return self.check()

    # -- the end -----------------------------------------------------------------------------

    def check(self) -> int:
        from approvals.transitions import ALLOWED

        requests_ = collect.requests_facts()
        db_status = {r.id: r.status for r in requests_}
        markers: dict[str, list[int]] = {}
        for r in requests_:
            if r.op_id:
                markers.setdefault(r.op_id, []).append(r.id)
        allowed = {str(k): [str(t) for t in v] for k, v in ALLOWED.items()}
        windows = [
            (e.started, e.ended, e.kind)
            for e in self.injector.events
            if e.kind in ("redis_restart", "db_drop")
        ]
        no_5xx, excused = inv.check_no_5xx(self.recorder.snapshot(), windows)
        results = [
            inv.check_applied_as_decided(requests_, collect.versions_facts()),
            inv.check_lifecycle(collect.request_events(), db_status, allowed),
            inv.check_capacity(
                collect.capacities(), collect.guarantee_changes(), collect.guaranteed_now()
            ),
            inv.check_no_request_lost(
                [
                    inv.CreateRecord(o.op_id, o.status, o.request_id, o.code)
                    for o in self.oplog.creates
                ],
                markers,
                {k: v[0] for k, v in self.oplog.seen.items()},
                db_status,
                allowed,
            ),
            *self.cluster_results(),
            no_5xx,
            inv.check_converged(
                collect.unfinished_syncs(),
                collect.running_runs(older_than=STUCK_RUN_SECONDS),
                requests_,
            ),
            self.audit_chain(),
            self.processes(),
        ]
        self.results.update(self.figures(requests_, excused))
        self.results["invariants"] = {r.name: r.as_json() for r in results}
        self.results["ok"] = all(r.ok for r in results)
        self.summary(results)
        return 0 if self.results["ok"] else 1

    def audit_chain(self) -> inv.Result:
        result = inv.Result("audit_chain_verified")
        env = self.env("verify")
        env["DATABASE_URL"] = self.database.url("soak-harness")
        done = subprocess.run(
            [sys.executable, "manage.py", "verify_audit_chain"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        result.checked = 1
        output = (done.stdout + done.stderr).strip()
        said = [line for line in output.splitlines() if "audit chain" in line]
        self.results["audit_chain"] = said[-1] if said else output[-500:]
        if done.returncode != 0:
            result.violations.append(output[-2000:] or f"exit {done.returncode}")
        return result

    def processes(self) -> inv.Result:
        result = inv.Result("no_process_died_unasked")
        died = self.results.get("processes_died", [])
        result.checked = len(self.stack.children)
        result.violations += [f"{name} exited on its own" for name in died]
        if self.injector and self.injector.errors:
            result.violations += [f"fault not injected: {e}" for e in self.injector.errors]
        for actor in self.actors:
            result.violations += [
                f"{actor.api.username} raised {n}× {error}" for error, n in actor.errors.items()
            ]
        return result

    def figures(self, requests_, excused: int) -> dict:
        from quotas.models import SyncRun

        retries = 0
        for worker in self.workers.values():
            with contextlib.suppress(OSError):
                retries += len(RETRY_LOG.findall(worker.log.read_text(errors="replace")))
        return {
            "requests_by_status": dict(sorted(Counter(r.status for r in requests_).items())),
            "requests_total": len(requests_),
            "client": {**self.recorder.summary(), "5xx_excused": dict(excused)},
            "client_actions": dict(sorted(self.oplog.actions.items())),
            "faults": self.injector.as_json(),
            "faults_by_kind": dict(Counter(e.kind for e in self.injector.events)),
            "sandbox_faults_fired": dict(sorted(self.control.fired.items())),
            "worker_task_retries": retries,
            "sync_runs": dict(
                sorted(Counter(SyncRun.objects.values_list("status", flat=True)).items())
            ),
        }

    def summary(self, results: list[inv.Result]) -> None:
        r = self.results
        lines = [
            "",
            f"Soak summary (seed {self.seed}, {self.options.seconds:g} s of load and faults)",
            f"  requests by outcome: {_pairs(r['requests_by_status'])} "
            f"(total {r['requests_total']})",
            f"  client calls: {r['client']['requests']}, retries {r['client']['retries']}, "
            f"replayed answers {r['client']['replayed']}, 5xx excused "
            f"{_pairs(r['client']['5xx_excused'])}",
            f"  answers: {_pairs(r['client']['by_status'])}",
            f"  faults injected: {_pairs(r['faults_by_kind'])}",
            f"  sandbox faults fired: {_pairs(r['sandbox_faults_fired'])}",
            f"  worker task retries: {r['worker_task_retries']}; "
            f"sync runs: {_pairs(r['sync_runs'])}",
            "  time to converge: "
            + (f"{r['converge_seconds']} s" if r.get("converge_seconds") is not None else "NEVER"),
            "  invariants:",
        ]
        for result in results:
            mark = "ok  " if result.ok else "FAIL"
            lines.append(f"    {mark} {result.name} ({result.checked} checked)")
            lines += [f"         - {v}" for v in result.violations[: inv.VIOLATIONS_SHOWN]]
        lines.append("SOAK PASSED" if r["ok"] else "SOAK FAILED")
        print("\n".join(lines), flush=True)

    def write_results(self) -> None:
        path = self.options.results
        path.parent.mkdir(parents=True, exist_ok=True)
        self.results["workdir"] = str(self.workdir)
        path.write_text(json.dumps(self.results, indent=2, default=str) + "\n")
        with (self.workdir / "exchanges.jsonl").open("w") as out:
            for exchange in self.recorder.as_json():
                out.write(json.dumps(exchange) + "\n")
        say(f"results in {path}")

    def close(self) -> None:
        self.stop_actors.set()
        if self.injector is not None:
            self.injector.stop()
        with contextlib.suppress(Exception):
            from django.db import connections

            connections.close_all()
        self.stack.close()


def _pairs(counts: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"


def _interrupt(signum, _frame) -> None:
    raise Interrupted(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    options = _arguments(argv)
    soak = Soak(options)
    previous = {s: signal.signal(s, _interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    code = 2
    try:
        code = soak.run()
    except (Interrupted, KeyboardInterrupt) as exc:
        say(f"interrupted ({exc or 'SIGINT'}): cleaning up")
        soak.results["interrupted"] = True
        code = 130
    except Exception as exc:
        say(f"soak aborted: {type(exc).__name__}: {exc}")
        for name, child in soak.stack.children.items():
            if child.process is not None and child.process.poll() is not None:
                say(f"{name} exited; last lines of {child.log}:\n{child.log_tail()}")
        soak.results["error"] = f"{type(exc).__name__}: {exc}"
        code = 2
    finally:
        # Ctrl-C again while cleaning up must not leave processes or the database behind.
        for s in previous:
            signal.signal(s, signal.SIG_IGN)
        soak.close()
        with contextlib.suppress(Exception):
            soak.write_results()
        for s, handler in previous.items():
            signal.signal(s, handler)
    return code
