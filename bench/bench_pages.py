"""Benchmark: the portal's common pages and API lists under concurrent clients, against a trivial
view on the same stack, in the same run.

    python -m bench.bench_pages [--teams 50 --clusters 4 --requests-per-team 60]
    BENCH_QUICK=1 python -m bench.bench_pages          (8 teams, 1 s a page; under ~45 s)

The portal runs under gunicorn on loopback as deployed (gthread, --workers 3 --threads 4 unless
told otherwise) with bench/settings.py: the portal's settings plus two trivial views
(bench/urls.py), a logged-in page that answers "ok" and an API view that answers {"user": id},
through the same middleware, session or token authentication and throttles. 20 kept-alive
connections from a few client processes (bench/loadclient.py) ask for one URL at a time: after a
warm-up, every answer completed in the window gives its latency, and their number over the
window the throughput. Pages are read as the people who use them: a team lead (leading 3
teams) for the dashboard and their request list, a platform admin for the queue, the cluster
overview, the cross-cluster summary and the audit log, and the API lists with tokens.

The data is the overview pages' test world (bench/world.py): teams with a namespace on every
cluster, allocations in two versions, usage rollups, requests in every state with their lines
and audit history, grants, suggestions, syncs and drift, analyzed once built (as autovacuum
would on a running server). Database: a throw-away PostgreSQL
database when BENCH_DATABASE_URL or DATABASE_URL names a server, else SQLite. The throttles'
cache is Redis when CACHE_URL names one (as in production), else each process's memory; their
rates are raised so the load is never refused, but they are counted as always. No page keeps
anything between requests: each is computed every time, as a user after any write sees it.

Figures, for each page: p50 and p95 latency (baseline: the trivial view's) and throughput
(baseline: the trivial view's throughput; the ratio is the share of it the page reaches). The
API lists are measured against the trivial API view likewise. A third yardstick, the trivial
view plus ten one-row queries (bench/urls.py), shows what the queries alone of a page that
reads ten times leave of the trivial view's throughput.
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.common import (
    ROOT,
    analyze,
    figure,
    percentile,
    quick,
    setup_django,
    throwaway_database,
    write_figures,
)
from bench.loadclient import LoadClient

HOST = "127.0.0.1"
TRIVIAL = "trivial view"
TRIVIAL_API = "trivial API view"
FLOOR_QUERIES = 10
FLOOR = f"trivial view + {FLOOR_QUERIES} one-row queries"
API_LIST = "/api/v1/requests/"
API_BIG_PAGE = f"{API_LIST}?page_size=500"

# (label, role, path, kind): kind "page" sends the role's session cookie, "api" its token.
TARGETS = [
    (TRIVIAL, "lead", "/bench/trivial/", "page"),
    (TRIVIAL_API, "admin", "/bench/trivial-api/", "api"),
    (FLOOR, "lead", f"/bench/floor/{FLOOR_QUERIES}/", "page"),
    ("dashboard / (lead)", "lead", "/", "page"),
    ("requests /requests/ (lead)", "lead", "/requests/", "page"),
    ("admin queue (admin)", "admin", "/requests/?status=submitted", "page"),
    ("requests /requests/ (admin)", "admin", "/requests/", "page"),
    ("cluster overview /clusters/ (admin)", "admin", "/clusters/", "page"),
    ("summary /summary/ (admin)", "admin", "/summary/", "page"),
    ("audit log /audit/ (admin)", "admin", "/audit/", "page"),
    ("API /api/v1/requests/ (lead token)", "lead", API_LIST, "api"),
    ("API /api/v1/requests/?page_size=500 (admin token)", "admin", API_BIG_PAGE, "api"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _server_env(db_url: str, var_dir: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "DJANGO_DEBUG"):
        env.pop(name, None)
    env.update(
        {
            "DATABASE_URL": db_url,
            "DJANGO_SETTINGS_MODULE": "bench.settings",
            "PORTAL_VAR_DIR": var_dir,
            "LOG_LEVEL": "WARNING",
            # Counted as always, never refusing the benchmark's load.
            "API_THROTTLE_TOKEN_RATE": "100000000/min",
            "API_THROTTLE_ADDRESS_RATE": "100000000/min",
            "PYTHONPATH": str(ROOT),
        }
    )
    env.update(extra or {})
    return env


def start_gunicorn(
    db_url: str, var_dir: str, *, workers: int, threads: int, env: dict[str, str] | None = None
):
    port = _free_port()
    log = open(Path(var_dir) / "gunicorn.log", "w")  # noqa: SIM115 (closed by stop_gunicorn)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "portal.wsgi",
            "--bind",
            f"{HOST}:{port}",
            "--workers",
            str(workers),
            "--threads",
            str(threads),
            "--worker-class",
            "gthread",
            "--no-control-socket",
        ],
        cwd=ROOT,
        env=_server_env(db_url, var_dir, env),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"gunicorn exited: see {log.name}")
        try:
            with urllib.request.urlopen(f"http://{HOST}:{port}/healthz", timeout=2) as answer:
                if answer.status == 200:
                    break
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"gunicorn did not answer in 60 s: see {log.name}")
        time.sleep(0.2)
    return proc, port, log


def stop_gunicorn(proc, log) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


def _headers(person, kind: str) -> dict[str, str]:
    if kind == "api":
        return {"Authorization": f"Bearer {person.token}", "Accept": "application/json"}
    return {"Cookie": f"sessionid={person.session}", "Accept-Language": "en"}


def measure(client: LoadClient, port: int, people: dict, targets, *, seconds, warmup) -> dict:
    """label -> LoadResult for each target."""
    results = {}
    for label, role, path, kind in targets:
        # A window in which no answer completed (a short one on a loaded machine) says nothing:
        # measured again in one twice as long, up to 16 times the asked length.
        window = seconds
        while True:
            result = client.run(
                HOST, port, path, _headers(people[role], kind), seconds=window, warmup=warmup
            )
            if result.latencies or window >= 16 * seconds:
                break
            window *= 2
        if not result.latencies:
            raise RuntimeError(f"{label}: no answer completed in {window} s")
        if result.errors:
            raise RuntimeError(f"{label}: {result.errors} answers not 200: {result.statuses}")
        results[label] = result
        rate = len(result.latencies) / result.seconds
        print(
            f"  {label}: {rate:,.1f}/s, p50 {percentile(result.latencies, 50) * 1000:.1f} ms",
            flush=True,
        )
    return results


# Pages are measured against the trivial view, API lists against the trivial API view (the
# same token authentication, throttles and renderer); the trivial API view against the view.
API_LABELS = {label for label, _role, _path, kind in TARGETS if kind == "api"} - {TRIVIAL_API}


def pages_figures(results: dict, database: str, size_label: str) -> list[dict]:
    def yardstick(label: str) -> tuple[float, float, float]:
        base = results[label]
        return (
            len(base.latencies) / base.seconds,
            percentile(base.latencies, 50) * 1000,
            percentile(base.latencies, 95) * 1000,
        )

    yardsticks = {TRIVIAL: yardstick(TRIVIAL)}
    if TRIVIAL_API in results:
        yardsticks[TRIVIAL_API] = yardstick(TRIVIAL_API)
    figures = []
    for label, result in results.items():
        rate = len(result.latencies) / result.seconds
        p50 = percentile(result.latencies, 50) * 1000
        p95 = percentile(result.latencies, 95) * 1000
        name = f"pages {size_label}: {label}"
        against = TRIVIAL_API if label in API_LABELS and TRIVIAL_API in yardsticks else TRIVIAL
        base_rate, base_p50, base_p95 = yardsticks[against]
        common = {"baseline_label": against, "database": database}
        figures += [
            figure(f"{name} p50", p50, "ms", baseline=base_p50, **common),
            figure(f"{name} p95", p95, "ms", baseline=base_p95, **common),
            figure(f"{name} throughput", rate, "req/s", baseline=base_rate, **common),
        ]
    return figures


def run(args) -> tuple[list[dict], dict]:
    from bench import world

    with (
        throwaway_database("bench_pages") as (db_url, database),
        tempfile.TemporaryDirectory(prefix="bench-pages-") as var_dir,
        LoadClient(connections=args.concurrency, processes=args.client_processes) as client,
    ):
        os.environ["LOG_LEVEL"] = "WARNING"
        for name in ("CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"):
            os.environ.pop(name, None)
        setup_django(db_url, var_dir=var_dir, settings="bench.settings")
        started = time.perf_counter()
        world.grow(
            teams=args.teams, clusters=args.clusters, requests_per_team=args.requests_per_team
        )
        analyze()
        people = world.people()
        sizes = world.counts()
        build_seconds = time.perf_counter() - started
        print(f"data: {sizes} in {build_seconds:.1f} s", flush=True)
        from django.db import connections

        connections.close_all()
        proc, port, log = start_gunicorn(
            db_url, var_dir, workers=args.workers, threads=args.threads
        )
        try:
            results = measure(
                client, port, people, TARGETS, seconds=args.seconds, warmup=args.warmup
            )
        finally:
            stop_gunicorn(proc, log)
    size_label = f"{sizes['teams']} teams"
    figures = pages_figures(results, database, size_label)
    details = {
        "data": sizes,
        "data_build_seconds": round(build_seconds, 1),
        "server": {
            "command": "gunicorn portal.wsgi (bench.settings)",
            "worker_class": "gthread",
            "workers": args.workers,
            "threads": args.threads,
            "throttle_cache": "redis" if os.environ.get("CACHE_URL") else "per-process memory",
        },
        "client": {
            "connections": args.concurrency,
            "processes": client.processes,
            "seconds_per_page": args.seconds,
            "warmup_seconds": args.warmup,
        },
        "answers": {label: len(r.latencies) for label, r in results.items()},
        "body_bytes": {label: r.body_bytes for label, r in results.items()},
        "cpus": os.cpu_count(),
    }
    return figures, details


def world_arguments(p: argparse.ArgumentParser) -> bool:
    """The world's size (bench/world.py) as the pages benchmark builds it (the instructions
    benchmark reads the same); True when the quick sizes apply."""
    small = quick()
    p.add_argument("--teams", type=int, default=8 if small else 50)
    p.add_argument("--clusters", type=int, default=2 if small else 4)
    p.add_argument("--requests-per-team", type=int, default=10 if small else 60)
    return small


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.bench_pages", description=__doc__)
    small = world_arguments(p)
    p.add_argument("--seconds", type=float, default=1.0 if small else 8.0, help="per page")
    p.add_argument("--warmup", type=float, default=0.3 if small else 2.0, help="per page")
    p.add_argument("--concurrency", type=int, default=20, help="kept-alive connections")
    p.add_argument("--client-processes", type=int, default=None)
    p.add_argument("--workers", type=int, default=3, help="gunicorn workers (as deployed)")
    p.add_argument("--threads", type=int, default=4, help="threads per worker (as deployed)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    figures, details = run(args)
    write_figures("pages", figures, details)
    return 0


if __name__ == "__main__":
    sys.exit(main())
