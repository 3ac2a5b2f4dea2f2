"""Every benchmark, one table: `python -m bench` (or `make bench`).

Runs each benchmark in its own process (each sets up Django its own way), gathers their
figures into one table (figure, value, baseline, ratio, database) and writes
bench/results.json. BENCH_QUICK=1 runs the smaller sizes (a few minutes in all).

    python -m bench                      every benchmark
    python -m bench sync pages           only these
    python -m bench --list               what there is
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime

from bench.common import FIGURES_ENV, OUT_DIR, ROOT, format_table, quick

RESULTS = ROOT / "bench" / "results.json"

# name -> (module, full-size arguments, quick arguments)
BENCHMARKS: dict[str, tuple[str, list[str], list[str]]] = {
    "sync": ("bench.bench_sync", ["--namespaces", "500,5000"], ["--namespaces", "100,500"]),
    "sync-real": ("bench.bench_sync_real", ["--namespaces", "5000"], ["--namespaces", "100"]),
    "apply": (
        "bench.bench_apply",
        ["--approvals", "200", "--namespaces", "50,1000"],
        ["--approvals", "30", "--namespaces", "20,200"],
    ),
    "pages": ("bench.bench_pages", [], []),
    "instructions": ("bench.bench_instructions", [], []),
    "queries": ("bench.bench_queries", [], []),
    "usage": ("bench.bench_usage", [], []),
}


def run_one(name: str, is_quick: bool) -> dict:
    module, full_args, quick_args = BENCHMARKS[name]
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    out = OUT_DIR / f"{name}.figures.json"
    out.unlink(missing_ok=True)
    env = dict(os.environ, **{FIGURES_ENV: str(out)})
    if is_quick:
        env["BENCH_QUICK"] = "1"
    args = quick_args if is_quick else full_args
    print(f"== {name}: python -m {module} {' '.join(args)}", flush=True)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, env=env)
    seconds = time.perf_counter() - started
    result = {"benchmark": name, "exit_code": proc.returncode, "seconds": round(seconds, 1)}
    if out.exists():
        data = json.loads(out.read_text())
        result["figures"] = data["figures"]
        result["details"] = data.get("details", {})
        if data.get("skipped"):
            result["skipped"] = data["skipped"]
    else:
        result["figures"] = []
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the benchmarks")
    parser.add_argument("--out", default=str(RESULTS), help="results file (bench/results.json)")
    args = parser.parse_args(argv)
    if args.list:
        for name, (module, full_args, _quick) in BENCHMARKS.items():
            print(f"{name:<12} python -m {module} {' '.join(full_args)}")
        return 0
    unknown = [name for name in args.names if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}; see --list")
    names = args.names or list(BENCHMARKS)
    is_quick = quick()
    started = time.perf_counter()
    runs = [run_one(name, is_quick) for name in names]
    figures = [fig for run in runs for fig in run["figures"]]
    skipped = {run["benchmark"]: run["skipped"] for run in runs if run.get("skipped")}
    failed = [
        run["benchmark"]
        for run in runs
        if run["exit_code"] != 0 or not (run["figures"] or run["benchmark"] in skipped)
    ]
    results = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": is_quick,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "seconds": round(time.perf_counter() - started, 1),
        "figures": figures,
        "runs": runs,
        "failed": failed,
        "skipped": skipped,
    }
    with open(args.out, "w") as fh:
        json.dump(results, fh, indent=2)
        fh.write("\n")
    print()
    print(format_table(figures))
    print(f"\n{len(figures)} figures in {results['seconds']} s; written to {args.out}")
    for name, reason in skipped.items():
        print(f"skipped {name}: {reason}")
    if failed:
        print(f"failed or without figures: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
