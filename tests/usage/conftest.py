"""A real Prometheus (Debian package) loaded with synthetic series for the usage tests."""

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from tests.support.net import free_port

PROMETHEUS = os.environ.get("PORTAL_PROMETHEUS", "prometheus")
PROMTOOL = os.environ.get("PORTAL_PROMTOOL", "promtool")
CONFIG = "global:\n  scrape_interval: 1h\nscrape_configs: []\n"


def _require(binary: str) -> str:
    # In CI a missing Prometheus is a broken machine: fail. On a developer's bare machine the
    # tests that need it are skipped with the command that enables them.
    path = shutil.which(binary)
    if path is None:
        message = (
            f"{binary} not found: install the Debian package "
            "(apt-get install -y --no-install-recommends prometheus)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return path


@pytest.fixture
def prometheus_with(tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """prometheus_with(openmetrics_text) -> URL of a Prometheus on a free loopback port that
    holds exactly those series (written as blocks by promtool); stopped afterwards."""
    prometheus, promtool = _require(PROMETHEUS), _require(PROMTOOL)
    processes: list[subprocess.Popen] = []

    def start(openmetrics: str) -> str:
        n = len(processes)
        data, source = tmp_path / f"tsdb{n}", tmp_path / f"series{n}.om"
        source.write_text(
            openmetrics if openmetrics.endswith("# EOF\n") else openmetrics + "# EOF\n"
        )
        subprocess.run(
            [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
            check=True,
            capture_output=True,
        )
        config = tmp_path / "prometheus.yml"
        config.write_text(CONFIG)
        port = free_port()
        log = open(tmp_path / f"prometheus{n}.log", "wb")  # noqa: SIM115
        process = subprocess.Popen(
            [
                prometheus,
                f"--config.file={config}",
                f"--storage.tsdb.path={data}",
                "--storage.tsdb.retention.time=100y",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        processes.append(process)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError((tmp_path / f"prometheus{n}.log").read_text()[-2000:])
            try:
                if requests.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    return url
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise RuntimeError("prometheus did not become ready in 30 s")

    try:
        yield start
    finally:
        for process in processes:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
