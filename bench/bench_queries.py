"""Benchmark: SQL queries per page at two data sizes, for every main page and API list, as each
role that reads it. A page whose count grows with the data (an N+1) fails the run.

    python -m bench.bench_queries [--small 5,2,5 --large 25,4,25]
    BENCH_QUICK=1 python -m bench.bench_queries                     (3,1,3 and 15,2,15)

Sizes are teams,clusters,requests-per-team of the overview pages' test world (bench/world.py);
the large one is 5-10 times the small one in teams, namespaces, requests, audit events and
rollups. Each page is read once to warm caches, then once more inside Django's
CaptureQueriesContext, with the test client logged in as the role (pages) or sending the
role's API token (API lists, ?page_size=500 so a page holds every row of either size).

Figures: "queries: <page> (size N)" for both sizes, the large one with the small one's count
as baseline (ratio 1.00: constant). Exits 1 when a page answers other than 200 or reads more
queries at the large size.
"""

import argparse
import os
import sys
import tempfile
from datetime import date, timedelta

from bench.common import figure, quick, setup_django, throwaway_database, write_figures

PAGE_SIZE = "page_size=500"
_TODAY = date.today()
_WEEK_AGO = _TODAY - timedelta(days=7)

# (role, path): pages with the session of the role, /api/ paths with its token.
PAGES = [
    ("lead", "/"),
    ("admin", "/"),
    ("auditor", "/"),
    ("lead", "/requests/"),
    ("admin", "/requests/"),
    ("admin", "/requests/?status=submitted"),
    ("auditor", "/requests/"),
    ("lead", "/requests/new/"),
    ("lead", "/clusters/"),
    ("admin", "/clusters/"),
    ("admin", "/clusters/c0/"),
    ("lead", "/summary/"),
    ("admin", "/summary/"),
    ("admin", "/audit/"),
    ("auditor", "/audit/"),
    ("lead", "/usage/"),
    ("admin", "/usage/"),
    ("lead", "/suggestions/"),
    ("admin", "/suggestions/"),
    ("lead", "/tokens/"),
    ("admin", "/tokens/"),
    ("lead", f"/api/v1/requests/?{PAGE_SIZE}"),
    ("admin", f"/api/v1/requests/?{PAGE_SIZE}"),
    ("admin", f"/api/v1/teams/?{PAGE_SIZE}"),
    ("admin", f"/api/v1/namespaces/?{PAGE_SIZE}"),
    ("admin", f"/api/v1/allocations/?{PAGE_SIZE}"),
    ("admin", f"/api/v1/clusters/?{PAGE_SIZE}"),
    ("admin", f"/api/v1/plan/violations/?{PAGE_SIZE}"),
    ("admin", f"/api/v1/sync-runs/?{PAGE_SIZE}"),
    ("admin", f"/api/v1/drift/?{PAGE_SIZE}"),
    ("admin", f"/api/v1/audit-events/?{PAGE_SIZE}"),
    ("admin", f"/api/v1/suggestions/?{PAGE_SIZE}"),
    ("admin", f"/api/v1/usage/daily/?start={_WEEK_AGO}&end={_TODAY}&{PAGE_SIZE}"),
]


def _size(text: str) -> tuple[int, int, int]:
    teams, clusters, per_team = (int(x) for x in text.split(","))
    return teams, clusters, per_team


def count_queries(pages, people) -> dict[tuple[str, str], int | str]:
    """(role, path) -> queries of one read, or a message when it did not answer 200."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    clients = {}
    for role, person in people.items():
        page_client = Client(HTTP_ACCEPT_LANGUAGE="en")
        page_client.cookies["sessionid"] = person.session
        api_client = Client(HTTP_AUTHORIZATION=f"Bearer {person.token}")
        clients[role] = (page_client, api_client)
    counts: dict[tuple[str, str], int | str] = {}
    for role, path in pages:
        page_client, api_client = clients[role]
        client = api_client if path.startswith("/api/") else page_client
        client.get(path)  # warm: per-process caches, sessions, last_used_at
        with CaptureQueriesContext(connection) as seen:
            response = client.get(path)
        if response.status_code != 200:
            counts[(role, path)] = f"answered {response.status_code}"
        else:
            counts[(role, path)] = len(seen.captured_queries)
    return counts


def _label(role: str, path: str) -> str:
    return f"{path} ({role})"


def run(small: tuple, large: tuple, pages=PAGES) -> tuple[list[dict], dict, list[str]]:
    from bench import world

    with (
        throwaway_database("bench_queries") as (db_url, database),
        tempfile.TemporaryDirectory(prefix="bench-queries-") as var_dir,
    ):
        # Throttles still count (in a shared cache, counts of a run a minute ago too) but never
        # refuse: a 429 would count no page.
        unlimited = "100000000/min"
        os.environ.update(
            {"API_THROTTLE_TOKEN_RATE": unlimited, "API_THROTTLE_ADDRESS_RATE": unlimited}
        )
        setup_django(db_url, var_dir=var_dir, settings="bench.settings")
        measured = {}
        sizes = {}
        people = None
        for name, (teams, clusters, per_team) in (("small", small), ("large", large)):
            world.grow(teams=teams, clusters=clusters, requests_per_team=per_team)
            people = people or world.people()
            sizes[name] = world.counts()
            measured[name] = count_queries(pages, people)
            print(f"{name}: {sizes[name]}", flush=True)
    figures = []
    problems = []
    small_n = sizes["small"]["requests"]
    large_n = sizes["large"]["requests"]
    for role, path in pages:
        key = (role, path)
        label = _label(role, path)
        before, after = measured["small"][key], measured["large"][key]
        if isinstance(before, str) or isinstance(after, str):
            problems.append(f"{label}: {before if isinstance(before, str) else after}")
            continue
        figures.append(
            figure(f"queries: {label} (size {small_n})", before, "queries", database=database)
        )
        figures.append(
            figure(
                f"queries: {label} (size {large_n})",
                after,
                "queries",
                baseline=before,
                baseline_label=f"size {small_n}",
                database=database,
            )
        )
        if after > before:
            problems.append(f"{label}: {before} queries at size {small_n}, {after} at {large_n}")
    details = {"sizes": sizes, "size_unit": "requests"}
    return figures, details, problems


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.bench_queries", description=__doc__)
    small = quick()
    p.add_argument("--small", type=_size, default=_size("3,1,3" if small else "5,2,5"))
    p.add_argument("--large", type=_size, default=_size("15,2,15" if small else "25,4,25"))
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    figures, details, problems = run(args.small, args.large)
    details["problems"] = problems
    write_figures("queries", figures, details)
    for problem in problems:
        print(f"FAIL {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
