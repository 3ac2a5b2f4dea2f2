"""The page benchmarks run end to end at a tiny size and give figures of the agreed shape
(names, units, baselines, ratios); their times are not asserted."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.common import ROOT

# In CI they always run (CI runs on PostgreSQL); elsewhere only against a PostgreSQL server.
pytestmark = pytest.mark.skipif(
    os.environ.get("CI") != "true"
    and not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")),
    reason="the benchmarks' throw-away database is made on the PostgreSQL server of the tests",
)


def _run(
    module: str, args: list[str], out: Path, *, timeout: int = 120
) -> tuple[subprocess.CompletedProcess, dict]:
    env = {**os.environ, "BENCH_QUICK": "1", "BENCH_FIGURES_OUT": str(out)}
    for name in ("DJANGO_SETTINGS_MODULE", "CELERY_BROKER_URL", "CACHE_URL"):
        env.pop(name, None)
    proc = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    data = json.loads(out.read_text()) if out.exists() else {}
    return proc, data


# A benchmark's timed run (a window in which no answer completed is measured again, longer):
# CI's, not make test's.
@pytest.mark.ci_only
def test_pages_gives_latency_and_throughput_of_each_page_against_the_trivial_view(tmp_path):
    from bench.bench_pages import API_LABELS, TARGETS, TRIVIAL, TRIVIAL_API

    proc, data = _run(
        "bench.bench_pages",
        [
            *("--teams", "3", "--clusters", "1", "--requests-per-team", "3"),
            *("--seconds", "0.3", "--warmup", "0.1", "--concurrency", "4"),
        ],
        tmp_path / "pages.json",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = {f["figure"]: f for f in data["figures"]}
    # Every target, each computed on every request (nothing is kept between requests).
    labels = [t[0] for t in TARGETS]
    assert len([t for t in TARGETS if t[3] == "page"]) >= 7
    assert len(figures) == 3 * len(labels)
    trivial = figures[f"pages 3 teams: {TRIVIAL} throughput"]
    assert trivial["ratio"] == 1.0
    trivial_api = figures[f"pages 3 teams: {TRIVIAL_API} throughput"]
    # The API lists against the trivial API view, everything else against the trivial view.
    assert API_LABELS and all(label.startswith("API ") for label in API_LABELS)
    for label in labels:
        name = f"pages 3 teams: {label}"
        against = TRIVIAL_API if label in API_LABELS else TRIVIAL
        for suffix, unit in (("p50", "ms"), ("p95", "ms"), ("throughput", "req/s")):
            fig = figures[f"{name} {suffix}"]
            assert fig["unit"] == unit
            assert fig["value"] > 0
            assert fig["baseline_label"] == against
            assert fig["database"] == "postgresql"
            assert fig["ratio"] == pytest.approx(fig["value"] / fig["baseline"], rel=0.01)
        base = trivial_api if label in API_LABELS else trivial
        assert figures[f"{name} throughput"]["baseline"] == base["value"]
    assert data["details"]["data"]["teams"] == 3
    assert set(data["details"]["answers"]) == set(labels)


# Reads under valgrind (CI installs it: .ci/run), a few minutes even at this size.
@pytest.mark.ci_only
def test_instructions_counts_each_targets_reads_against_the_trivial_views(tmp_path):
    from bench.bench_pages import API_LABELS, TARGETS, TRIVIAL, TRIVIAL_API

    proc, data = _run(
        "bench.bench_instructions",
        ["--teams", "3", "--clusters", "1", "--requests-per-team", "3", "--reads", "1"],
        tmp_path / "instructions.json",
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "skipped" not in data
    figures = {f["figure"]: f for f in data["figures"]}
    assert len(figures) == len(TARGETS)
    trivial = figures[f"instructions 3 teams: {TRIVIAL}"]
    assert trivial["ratio"] == 1.0
    trivial_api = figures[f"instructions 3 teams: {TRIVIAL_API}"]
    for label, *_ in TARGETS:
        fig = figures[f"instructions 3 teams: {label}"]
        assert fig["unit"] == "M instr./read"
        base = trivial_api if label in API_LABELS else trivial
        assert fig["baseline"] == base["value"] > 0
        assert fig["ratio"] == pytest.approx(fig["value"] / fig["baseline"], rel=0.01)
        if label not in (TRIVIAL, TRIVIAL_API):
            # Each dump holds that target's reads: every page and list does more than the
            # trivial view it is measured against (a dump of nothing, or of another target's
            # reads, would not).
            assert fig["ratio"] > 1, label
    assert set(data["details"]["instructions_per_read"]) == {label for label, *_ in TARGETS}


def test_queries_counts_every_page_at_two_sizes(tmp_path):
    from bench.bench_queries import PAGES

    proc, data = _run(
        "bench.bench_queries", ["--small", "2,1,2", "--large", "6,2,6"], tmp_path / "q.json"
    )
    figures = data["figures"]
    sizes = data["details"]["sizes"]
    small, large = sizes["small"]["requests"], sizes["large"]["requests"]
    assert large >= 5 * small
    assert len(figures) == 2 * len(PAGES), data["details"]["problems"]
    by_name = {f["figure"]: f for f in figures}
    for role, path in PAGES:
        before = by_name[f"queries: {path} ({role}) (size {small})"]
        after = by_name[f"queries: {path} ({role}) (size {large})"]
        assert before["unit"] == after["unit"] == "queries"
        assert before["baseline"] is None
        assert after["baseline"] == before["value"] > 0
        assert after["ratio"] == pytest.approx(after["value"] / before["value"], rel=0.01)
    # Exit status: 1 exactly when some page reads more queries at the larger size.
    assert proc.returncode == (1 if data["details"]["problems"] else 0), proc.stderr[-3000:]
