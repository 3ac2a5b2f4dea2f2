"""The README's test command and CI's: `make test` runs every test but the CI-only ones, in
parallel; `make test-ci` runs those (tests/real, the soak, the benchmarks' run); .ci/run calls
both, and the README names both."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def recipe(target: str) -> str:
    makefile = (REPO / "Makefile").read_text()
    match = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n)+)", makefile, re.M)
    assert match, f"no target {target} in the Makefile"
    return match.group(1)


def test_make_test_is_parallel_and_leaves_the_ci_only_tests_out():
    test = recipe("test")
    assert "-m pytest -n $(TEST_WORKERS)" in test
    assert '-m "not ci_only"' in test
    assert "-m ci_only" in recipe("test-ci")


def test_ci_runs_the_readme_command_and_the_ci_target():
    run = (REPO / ".ci" / "run").read_text().splitlines()
    commands = [line.split(" PYTEST_ARGS")[0] for line in run if line.startswith("make test")]
    assert commands == ["make test", "make test-ci"]
    readme = (REPO / "README.md").read_text()
    assert "make test " in readme and "`make test-ci`" in readme and "ci_only" in readme


def test_xdist_is_a_pinned_dev_dependency_and_workers_are_isolated():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert any(
        re.fullmatch(r"pytest-xdist==[\d.]+", d)
        for d in project["project"]["optional-dependencies"]["dev"]
    )
    ini = project["tool"]["pytest"]["ini_options"]
    assert ini["DJANGO_SETTINGS_MODULE"] == "tests.support.settings"


def test_the_real_control_plane_the_soak_and_the_benchmark_run_are_ci_only(tmp_path):
    """Nothing of them is left once make test's selection applies (pytest exits 5: no test)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "not ci_only",
            "tests/real",
            "tests/soak/test_soak.py::test_a_short_soak_with_every_fault_passes_every_invariant",
            "tests/bench/test_runner.py::test_quick_run_gathers_every_figure_into_one_results_file",
            "tests/bench/test_bench_pages_queries.py::"
            "test_pages_gives_latency_and_throughput_of_each_page_against_the_trivial_view",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 5, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"\b0/\d+ tests collected|no tests collected", done.stdout), done.stdout[
        -2000:
    ]
