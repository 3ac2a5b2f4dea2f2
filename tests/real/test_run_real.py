"""`make run-real` as a newcomer runs it: the portal with cluster demo on a fresh real control
plane, GPU work submitted once the approved quota is in force, a kubeconfig for kubectl, and
everything stopped by Ctrl-C."""

from __future__ import annotations

import json
import re
import signal
import stat
import subprocess
import time
from pathlib import Path

from tests.support.portal_process import (
    port_open,
    run_kubectl,
    start_run_portal,
    web_and_sandbox_ports,
)
from tests.support.waiting import poll

BANNER = "GPU work submitted to the real control plane"


def test_run_real_runs_the_demo_on_the_real_control_plane_and_stops_it(control_plane, tmp_path):
    port, sandbox_port = web_and_sandbox_ports()
    log_path = tmp_path / "run.log"
    log = log_path.open("w+")
    proc = start_run_portal(
        tmp_path,
        "--real-cluster",
        "--port",
        str(port),
        "--sandbox-port",
        str(sandbox_port),
        stdout=log,
    )
    try:
        # The summary (its kubeconfig among it) is printed last, once the web server answers.
        poll(
            "the demo's work submitted and the summary printed",
            lambda: BANNER in (text := log_path.read_text()) and "Ctrl-C stops everything." in text,
            timeout=300,
        )
        output = log_path.read_text()
        server = re.search(r"Real control plane of cluster demo: (https://\S+)", output)
        kubeconfig = Path(re.search(r"export KUBECONFIG=(\S+)", output).group(1))
        assert server and kubeconfig.is_relative_to(tmp_path)
        assert stat.S_IMODE(kubeconfig.stat().st_mode) == 0o600
        # The portal pushed the approved quota there (a sync by the run's worker) ...
        quotas = json.loads(
            run_kubectl(
                kubeconfig, "get", "resourcequotas", "-A", "-o", "json", home=tmp_path
            ).stdout
        )
        hard = {
            (q["metadata"]["namespace"], q["metadata"]["name"]): q["spec"]["hard"]
            for q in quotas["items"]
        }
        assert hard[("team-a-training", "gpu-quota")] == {"requests.nvidia.com/gpu": "10"}

        # ... and the GPU work runs on the fake nodes.
        def running_pretrain() -> bool:
            listed = run_kubectl(kubeconfig, "get", "pods", "-A", "-o", "json", home=tmp_path)
            pods = json.loads(listed.stdout)["items"] if listed.returncode == 0 else []
            return [
                p["status"].get("phase")
                for p in pods
                if p["metadata"]["name"].startswith("pretrain-")
            ] == ["Running"] * 6

        poll("pretrain's pods running", running_pretrain)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        log.close()
    output = log_path.read_text()
    assert code == 0, output[-3000:]
    assert "Stopped." in output
    api_port = int(server.group(1).rsplit(":", 1)[1])
    deadline = time.monotonic() + 30
    while port_open(api_port) or port_open(port):
        assert time.monotonic() < deadline, "the control plane or web outlived run_portal"
        time.sleep(0.5)
