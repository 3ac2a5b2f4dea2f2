"""Fault injection: error answers, latency, timeouts, dropped connections, lost responses, and the
HTTP control API for a sandbox in another process."""

from __future__ import annotations

import json
import socket
import stat
import subprocess
import sys
import time
from http.client import HTTPConnection, HTTPException
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from kubesandbox import SandboxServer
from tests.support.kube import api_client_for

ROOT = Path(__file__).resolve().parents[2]
NS = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}


def request(
    server: Any,
    method: str,
    path: str,
    body: Any = None,
    *,
    timeout: float = 5,
    token: str | None = None,
) -> tuple[int, dict[str, str], Any]:
    """One request on a fresh connection (no retries): (status, headers, decoded body)."""
    url = urlsplit(server.url)
    conn = HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        conn.request(
            method, path, body=json.dumps(body) if body is not None else None, headers=headers
        )
        response = conn.getresponse()
        raw = response.read()
        return response.status, dict(response.getheaders()), json.loads(raw) if raw else None
    finally:
        conn.close()


def exists(server: SandboxServer, name: str = "team-a") -> bool:
    return server.get_object("v1", "Namespace", name) is not None


def test_status_fault_for_the_next_n_requests(kube_sandbox: SandboxServer) -> None:
    kube_sandbox.faults.add("status", status=429, count=2, retry_after=3)
    for _ in range(2):
        status, headers, body = request(kube_sandbox, "GET", "/api/v1/namespaces")
        assert status == 429 and headers["Retry-After"] == "3"
        assert (body["kind"], body["reason"], body["code"]) == ("Status", "TooManyRequests", 429)
    assert request(kube_sandbox, "GET", "/api/v1/namespaces")[0] == 200
    assert kube_sandbox.stats.faults_injected == 2


def test_status_fault_does_not_execute_the_request(kube_sandbox: SandboxServer) -> None:
    kube_sandbox.faults.add("status", status=500, count=1)
    status, _, body = request(kube_sandbox, "POST", "/api/v1/namespaces", NS)
    assert status == 500 and body["reason"] == "InternalError"
    assert not exists(kube_sandbox) and kube_sandbox.stats.writes == 0
    assert request(kube_sandbox, "POST", "/api/v1/namespaces", NS)[0] == 201


def test_methods_and_path_filters(kube_sandbox: SandboxServer) -> None:
    kube_sandbox.faults.add("status", status=503, methods={"POST", "PUT", "PATCH", "DELETE"})
    kube_sandbox.faults.add("status", status=500, path_contains="/resourcequotas")
    assert request(kube_sandbox, "GET", "/api/v1/namespaces")[0] == 200
    assert request(kube_sandbox, "GET", "/api/v1/resourcequotas")[0] == 500
    status, headers, _ = request(kube_sandbox, "POST", "/api/v1/namespaces", NS)
    assert status == 503 and "Retry-After" in headers
    kube_sandbox.faults.clear()
    assert request(kube_sandbox, "POST", "/api/v1/namespaces", NS)[0] == 201


def _pattern(seed: int) -> list[int]:
    server = SandboxServer().start()
    try:
        server.faults.add("status", status=503, ratio=0.4, seed=seed)
        return [request(server, "GET", "/api/v1/namespaces")[0] for _ in range(25)]
    finally:
        server.stop()


def test_ratio_is_deterministic_with_a_seed() -> None:
    first, second = _pattern(7), _pattern(7)
    assert first == second
    assert 0 < first.count(503) < 25
    assert _pattern(8) != first


def test_latency_then_served(kube_sandbox: SandboxServer) -> None:
    kube_sandbox.faults.add("latency", seconds=0.3, count=1)
    started = time.monotonic()
    status, _, _ = request(kube_sandbox, "POST", "/api/v1/namespaces", NS)
    assert status == 201 and time.monotonic() - started >= 0.3
    assert exists(kube_sandbox)


def test_drop_closes_without_answer_and_changes_nothing(kube_sandbox: SandboxServer) -> None:
    kube_sandbox.faults.add("drop", count=1)
    with pytest.raises((HTTPException, ConnectionError)):
        request(kube_sandbox, "POST", "/api/v1/namespaces", NS)
    assert not exists(kube_sandbox) and kube_sandbox.stats.writes == 0
    assert request(kube_sandbox, "POST", "/api/v1/namespaces", NS)[0] == 201


def test_timeout_holds_past_the_client_timeout_and_changes_nothing(
    kube_sandbox: SandboxServer,
) -> None:
    kube_sandbox.faults.add("timeout", seconds=2, count=1, methods={"POST"})
    with pytest.raises((TimeoutError, socket.timeout)):
        request(kube_sandbox, "POST", "/api/v1/namespaces", NS, timeout=0.3)
    assert not exists(kube_sandbox)
    assert request(kube_sandbox, "POST", "/api/v1/namespaces", NS)[0] == 201


def test_drop_after_write_is_the_lost_response_case(kube_sandbox: SandboxServer) -> None:
    kube_sandbox.faults.add("drop_after_write", count=1, methods={"POST"})
    with pytest.raises((HTTPException, ConnectionError)):
        request(kube_sandbox, "POST", "/api/v1/namespaces", NS)
    assert exists(kube_sandbox) and kube_sandbox.stats.writes == 1
    # The client's retry of the create now meets its own earlier write.
    assert request(kube_sandbox, "POST", "/api/v1/namespaces", NS)[0] == 409


def test_official_client_sees_injected_errors(kube_sandbox: SandboxServer) -> None:
    kube_sandbox.faults.add("status", status=500, count=1, methods={"POST"})
    with api_client_for(kube_sandbox, retries=0) as api_client:
        core = k8s.CoreV1Api(api_client)
        with pytest.raises(ApiException) as failed:
            core.create_namespace(NS)
        assert failed.value.status == 500
        assert core.create_namespace(NS).metadata.name == "team-a"


def test_invalid_fault_arguments(kube_sandbox: SandboxServer) -> None:
    with pytest.raises(ValueError, match="unknown fault kind"):
        kube_sandbox.faults.add("explode")
    with pytest.raises(ValueError, match="status"):
        kube_sandbox.faults.add("status")
    with pytest.raises(ValueError, match="seconds"):
        kube_sandbox.faults.add("timeout")


def test_fault_injection_over_http_is_off_unless_allowed() -> None:
    server = SandboxServer(token="ctl-token").start()
    try:
        for method, body in (("POST", {"kind": "drop"}), ("GET", None), ("DELETE", None)):
            status, _, answer = request(server, method, "/sandbox/faults", body, token="ctl-token")
            assert status == 403, (method, answer)
            assert "start the sandbox with --allow-faults" in answer["message"]
        assert server.faults.rules == []
        assert request(server, "GET", "/api/v1/namespaces", token="ctl-token")[0] == 200
    finally:
        server.stop()


def test_command_line_serves_with_a_token_and_without_faults(tmp_path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("cli-token\n")
    kubeconfig = tmp_path / "kubeconfig"
    command = [
        sys.executable,
        "-m",
        "kubesandbox",
        "--port",
        "0",
        "--token-file",
        str(token_file),
        "--kubeconfig-out",
        str(kubeconfig),
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.rstrip().endswith("(token required, faults off)") and "cli-token" not in line
        url = urlsplit(line.split("listening on ", 1)[1].split()[0])
        server = SimpleNamespace(url=f"http://{url.netloc}")
        assert request(server, "GET", "/api/v1/namespaces")[0] == 401
        assert request(server, "POST", "/api/v1/namespaces", NS, token="wrong")[0] == 401
        assert request(server, "POST", "/sandbox/faults", {"kind": "drop"})[0] == 401
        assert (
            request(server, "POST", "/sandbox/faults", {"kind": "drop"}, token="cli-token")[0]
            == 403
        )
        assert request(server, "POST", "/api/v1/namespaces", NS, token="cli-token")[0] == 201
        # The kubeconfig written for kubectl carries the token, readable by the owner only.
        assert stat.S_IMODE(kubeconfig.stat().st_mode) == 0o600
        config = yaml.safe_load(kubeconfig.read_text())
        assert config["users"][0]["user"] == {"token": "cli-token"}
        assert config["clusters"][0]["cluster"]["server"] == server.url
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_http_control_api() -> None:
    server = SandboxServer(token="ctl-token", allow_faults=True).start()
    try:
        assert (
            request(server, "POST", "/sandbox/faults", {"kind": "status", "status": 503})[0] == 401
        )
        status, _, rule = request(
            server,
            "POST",
            "/sandbox/faults",
            {"kind": "status", "status": 503, "count": 1, "methods": ["POST"]},
            token="ctl-token",
        )
        assert status == 201 and rule["count"] == 1
        assert request(server, "POST", "/api/v1/namespaces", NS, token="ctl-token")[0] == 503
        assert request(server, "POST", "/api/v1/namespaces", NS, token="ctl-token")[0] == 201
        status, _, stats = request(server, "GET", "/sandbox/stats", token="ctl-token")
        assert status == 200
        assert (
            stats["requests"]["POST"] == 2
            and stats["writes"] == 1
            and stats["faults_injected"] == 1
        )
        assert stats["writes_by_kind"] == {"Namespace": 1}
        assert request(server, "POST", "/sandbox/stats/reset", token="ctl-token")[0] == 200
        assert request(server, "GET", "/sandbox/stats", token="ctl-token")[2]["writes"] == 0
        request(server, "POST", "/sandbox/faults", {"kind": "drop"}, token="ctl-token")
        assert request(server, "DELETE", "/sandbox/faults", token="ctl-token")[0] == 200
        assert request(server, "GET", "/api/v1/namespaces/team-a", token="ctl-token")[0] == 200
        assert (
            request(
                server, "POST", "/sandbox/faults", {"kind": "status", "bogus": 1}, token="ctl-token"
            )[0]
            == 400
        )
        assert request(server, "POST", "/sandbox/reset", token="ctl-token")[0] == 200
        assert request(server, "GET", "/api/v1/namespaces/team-a", token="ctl-token")[0] == 404
    finally:
        server.stop()
