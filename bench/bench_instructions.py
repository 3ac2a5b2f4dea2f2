"""Benchmark: what each page and API list of the pages benchmark costs the portal's own process,
in instructions counted by callgrind, against the trivial view's, in the same run.

    python -m bench.bench_instructions [--teams 50 --clusters 4 --requests-per-team 60 --reads 5]
    BENCH_QUICK=1 python -m bench.bench_instructions          (8 teams, 2 reads; a few minutes)
    python -m bench.bench_instructions --only summary         (the targets whose label has
                                                               "summary", and the baselines)

Why: a throughput under load moves with whatever else the machine runs (on the 2-core
development machine the trivial view's rate moved by a factor of two between runs minutes
apart, and so did the server's CPU seconds per answer), so a change that takes a tenth off a
page cannot be told from the noise there. The instructions the same reads execute are the same
from run to run within a fraction of a percent: a change's effect on the process's own work
(Django, the portal, the templates, the database driver's client side) shows whatever the
machine does. What PostgreSQL and Redis spend (planning, executing) is in their own processes
and not counted: the pages benchmark's throughput remains the figure the goals are read at.

How: the world of the pages benchmark (bench/world.py, the same sizes) in a throw-away
database; then this module again, under ``valgrind --tool=callgrind``, reads each target as
its role (Django's test client, the session cookie or the API token), a few times to warm,
then ``--reads`` times between callgrind's client requests (a zero before, a dump after: a
C helper of four lines built here with the C compiler), so each dump holds those reads only.

Figures: "instructions <size>: <target>", millions per read, against the trivial view (the API
lists against the trivial API view). Skipped, saying why, without valgrind, its callgrind.h
or a C compiler.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.bench_pages import API_LABELS, TARGETS, TRIVIAL, TRIVIAL_API, world_arguments
from bench.common import (
    ROOT,
    analyze,
    figure,
    setup_django,
    throwaway_database,
    write_figures,
    write_skipped,
)

HEADER = Path("/usr/include/valgrind/callgrind.h")
HELPER = """
#include <valgrind/callgrind.h>
void bench_zero(void) { CALLGRIND_ZERO_STATS; }
void bench_dump(const char *label) { CALLGRIND_DUMP_STATS_AT(label); }
"""
WARM_READS = 3


def missing() -> str | None:
    """Why the benchmark cannot run here, or None."""
    for tool in ("valgrind", "cc"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (valgrind and a C compiler: Debian's packages)"
    if not HEADER.exists():
        return f"{HEADER} is missing (valgrind's headers)"
    return None


def build_helper(directory: Path) -> Path:
    source = directory / "callgrind_helper.c"
    source.write_text(HELPER)
    library = directory / "callgrind_helper.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", library, source], check=True)
    return library


def dumped(directory: Path) -> dict[str, int]:
    """Label -> instructions of each dump callgrind wrote (``callgrind.out.<n>`` files)."""
    found = {}
    for path in directory.glob("callgrind.out*"):
        text = path.read_text(errors="replace")
        trigger = re.search(r"^desc: Trigger: Client Request: (.+)$", text, re.M)
        total = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
        if trigger and total:
            found[trigger.group(1)] = int(total.group(1))
    return found


def chosen(only: list[str] | None) -> list[tuple[str, str, str, str]]:
    """The targets whose label holds one of ``only`` (all without it), and the two baselines
    the others are measured against."""
    if not only:
        return list(TARGETS)
    words = [w.lower() for w in only]
    return [
        target
        for target in TARGETS
        if target[0] in (TRIVIAL, TRIVIAL_API) or any(w in target[0].lower() for w in words)
    ]


def _child(plan_file: str) -> int:
    """Under callgrind: read each target, warm, then its measured reads between a zero and a
    dump of callgrind's counters."""
    import ctypes

    plan = json.loads(Path(plan_file).read_text())
    import django

    django.setup()
    from django.test import Client

    helper = ctypes.CDLL(plan["helper"])
    for label, role, path, kind in chosen(plan["only"]):
        person = plan["people"][role]
        if kind == "api":
            client = Client(HTTP_AUTHORIZATION=f"Bearer {person['token']}")
        else:
            client = Client(HTTP_ACCEPT_LANGUAGE="en")
            client.cookies["sessionid"] = person["session"]
        for _ in range(WARM_READS):
            client.get(path)
        helper.bench_zero()
        statuses = [client.get(path).status_code for _ in range(plan["reads"])]
        helper.bench_dump(label.encode())
        if set(statuses) != {200}:
            print(f"{label}: answered {statuses}", file=sys.stderr)
            return 1
    return 0


def run(args) -> tuple[list[dict], dict]:
    from bench import world

    with (
        throwaway_database("bench_instructions") as (db_url, database),
        tempfile.TemporaryDirectory(prefix="bench-instructions-") as tmp,
    ):
        directory = Path(tmp)
        os.environ["LOG_LEVEL"] = "WARNING"
        unlimited = "100000000/min"  # the throttles count, never refuse
        os.environ.update(
            {"API_THROTTLE_TOKEN_RATE": unlimited, "API_THROTTLE_ADDRESS_RATE": unlimited}
        )
        setup_django(db_url, var_dir=tmp, settings="bench.settings")
        world.grow(
            teams=args.teams, clusters=args.clusters, requests_per_team=args.requests_per_team
        )
        analyze()
        people = world.people()
        sizes = world.counts()
        from django.db import connections

        connections.close_all()
        plan = {
            "helper": str(build_helper(directory)),
            "people": {role: vars(person) for role, person in people.items()},
            "reads": args.reads,
            "only": args.only,
        }
        plan_file = directory / "plan.json"
        plan_file.write_text(json.dumps(plan))
        proc = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={directory / 'callgrind.out'}",
                sys.executable,
                "-m",
                "bench.bench_instructions",
                "--child",
                str(plan_file),
            ],
            cwd=ROOT,  # with this process's environment: the world's database, as set up here
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"the reads under callgrind failed:\n{proc.stderr[-3000:]}")
        counts = dumped(directory)
    targets = chosen(args.only)
    missed = [label for label, *_ in targets if label not in counts]
    if missed:
        raise RuntimeError(f"no callgrind dump of {', '.join(missed)}")
    per_read = {label: counts[label] / args.reads / 1e6 for label, *_ in targets}
    size_label = f"{sizes['teams']} teams"
    figures = []
    for label, *_ in targets:
        against = TRIVIAL_API if label in API_LABELS else TRIVIAL
        figures.append(
            figure(
                f"instructions {size_label}: {label}",
                per_read[label],
                "M instr./read",
                baseline=per_read[against],
                baseline_label=against,
                database=database,
            )
        )
    details = {
        "data": sizes,
        "reads_per_target": args.reads,
        "warm_reads": WARM_READS,
        "instructions_per_read": {label: round(n * 1e6) for label, n in per_read.items()},
        "counted": "the portal's process only (Django's test client), not PostgreSQL or Redis",
    }
    return figures, details


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.bench_instructions", description=__doc__)
    small = world_arguments(p)
    p.add_argument("--reads", type=int, default=2 if small else 5, help="measured per target")
    p.add_argument(
        "--only",
        action="append",
        metavar="TEXT",
        help="measure the targets whose label holds TEXT (repeatable), with the baselines",
    )
    p.add_argument("--child", help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.child:
        return _child(args.child)
    reason = missing()
    if reason:
        if os.environ.get("CI") == "true":  # CI installs them (.ci/run): missing is a failure
            print(f"instructions: {reason}", file=sys.stderr)
            return 1
        write_skipped("instructions", reason)
        return 0
    figures, details = run(args)
    write_figures("instructions", figures, details)
    return 0


if __name__ == "__main__":
    sys.exit(main())
