"""`python -m bench`: the figure record, the one table, and a quick run of the benchmarks that
drive the sync, a real worker with Redis, and the usage pipeline on PostgreSQL."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.common import figure, format_table, percentile, postgres_server_url, with_db

ROOT = Path(__file__).resolve().parents[2]


def test_figure_ratio_is_value_over_baseline_and_absent_without_one():
    assert figure("x", 3.0, "s", baseline=1.5)["ratio"] == 2.0
    assert figure("x", 3.0, "s")["ratio"] is None
    assert figure("x", 3.0, "s", baseline=0)["ratio"] is None


def test_percentile_is_nearest_rank():
    values = list(range(1, 201))
    assert percentile(values, 50) == 100
    assert percentile(values, 95) == 190
    assert percentile([7.0], 95) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50)


def test_table_has_one_row_per_figure_with_baseline_ratio_and_database():
    rows = [
        figure("first", 2.5, "s", baseline=1.25, baseline_label="plain", database="postgresql"),
        figure("second", 12, "queries", database="sqlite"),
    ]
    lines = format_table(rows).splitlines()
    assert lines[0].split() == ["figure", "value", "baseline", "ratio", "database"]
    assert len(lines) == 4
    assert "1.250 s (plain)" in lines[2] and "2.00" in lines[2] and "postgresql" in lines[2]
    assert lines[3].split()[-1] == "sqlite" and " - " in lines[3]


def test_unknown_benchmark_is_refused_by_name():
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "nonsense"], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "unknown benchmark(s): nonsense" in proc.stderr


def test_instructions_only_keeps_the_named_targets_and_both_baselines():
    from bench.bench_instructions import chosen
    from bench.bench_pages import TARGETS, TRIVIAL, TRIVIAL_API

    assert chosen(None) == TARGETS
    labels = [label for label, *_ in chosen(["Summary", "audit"])]
    assert labels == [
        TRIVIAL,
        TRIVIAL_API,
        "summary /summary/ (admin)",
        "audit log /audit/ (admin)",
    ]
    assert [label for label, *_ in chosen(["nothing of that name"])] == [TRIVIAL, TRIVIAL_API]


@pytest.fixture
def bench_stores():
    """PostgreSQL (the configured one) and Redis (the apply benchmark's): required in CI."""
    import psycopg
    import redis

    from bench.bench_apply import broker_url

    missing = []
    server = postgres_server_url()
    try:
        if server is None:
            raise psycopg.OperationalError("DATABASE_URL is not PostgreSQL")
        psycopg.connect(with_db(server, "postgres"), connect_timeout=3).close()
    except psycopg.Error as exc:
        missing.append(f"PostgreSQL ({exc})")
    try:
        redis.Redis.from_url(broker_url(), socket_timeout=2).ping()
    except redis.RedisError as exc:
        missing.append(f"Redis at {broker_url()} ({exc})")
    if missing:
        message = f"the benchmarks need {' and '.join(missing)}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.mark.ci_only
def test_quick_run_gathers_every_figure_into_one_results_file(bench_stores, tmp_path):
    out = tmp_path / "results.json"
    env = dict(os.environ, BENCH_QUICK="1")
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "sync", "apply", "usage", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["quick"] is True and results["failed"] == [] and results["skipped"] == {}
    by_bench = {run["benchmark"]: run["figures"] for run in results["runs"]}
    assert set(by_bench) == {"sync", "apply", "usage"}
    # Sync: three figures per cluster size, each against the plain-HTTP baseline.
    assert len(by_bench["sync"]) == 6
    for fig in by_bench["sync"]:
        assert fig["baseline"] > 0 and fig["database"] == "postgresql"
    resync = [f for f in by_bench["sync"] if "unchanged re-sync" in f["figure"]]
    assert all(f["note"].endswith(", 0 writes") for f in resync)
    # Approve -> applied: p50 and p95 per size and the growth between the sizes.
    assert len(by_bench["apply"]) == 5
    assert all(f["database"] == "postgresql, redis" for f in by_bench["apply"])
    p50, p95 = by_bench["apply"][0], by_bench["apply"][1]
    assert p50["value"] <= p95["value"]
    assert "growth" in by_bench["apply"][-1]["figure"]
    # Usage: import, its write floor, memory, rollup, the reads, the size on disk, suggestions,
    # showback, each with its in-run baseline but the size.
    assert [f["figure"].split(" (")[0] for f in by_bench["usage"]] == [
        "usage import",
        "usage import: writing the samples alone",
        "usage import peak memory",
        "usage daily rollup",
        "a namespace's month of samples",
        "dashboard usage chart of a team",
        "samples on disk",
        "suggestions",
        "showback",
    ]
    floor = by_bench["usage"][1]
    assert 0 < floor["value"] < by_bench["usage"][0]["value"]
    disk = by_bench["usage"][6]
    assert disk["unit"] == "MiB per million samples" and disk["value"] > 0
    assert "month partitions" in disk["figure"]
    for fig in results["figures"]:
        if fig["baseline"]:
            assert fig["ratio"] == pytest.approx(fig["value"] / fig["baseline"], rel=0.02)
    assert "figure" in proc.stdout and f"{len(results['figures'])} figures" in proc.stdout
