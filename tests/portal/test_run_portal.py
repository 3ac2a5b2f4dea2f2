"""`make run`'s entry point on a bare machine: starts everything, serves the login page, stops."""

import json
import os
import re
import signal
import ssl
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.support.net import free_port
from tests.support.portal_process import (
    ROOT,
    UNSET,
    port_open,
    run_kubectl,
    start_run_portal,
    web_and_sandbox_ports,
)


def _wait_for(
    url: str,
    deadline: float,
    *,
    token: str | None = None,
    context: ssl.SSLContext | None = None,
) -> tuple[int, bytes]:
    last_error: Exception | None = None
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(request, timeout=20, context=context) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            # TimeoutError: the server took the connection but its first answer (cold
            # imports and template compilation on a loaded machine) came late; ask again.
            last_error = exc
            time.sleep(0.5)
    raise AssertionError(f"{url} did not answer in time: {last_error}")


def _static(port: int, path: str) -> tuple[int, dict, int]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", headers={"Accept-Encoding": "gzip"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, dict(response.headers), len(response.read())


def _static_files_are_served_as_deployed(port: int, login_page: bytes, var_dir) -> None:
    """Hashed names, gzip and a year's immutable cache: plotly.js (4.8 MB) is fetched once."""
    css = re.search(rb'href="(/static/portal/portal\.[0-9a-f]{12}\.css)"', login_page)
    assert css, "the stylesheet is not linked under a hashed name"
    manifest = json.loads((var_dir / "static" / "staticfiles.json").read_text())
    plotly = "/static/" + manifest["paths"]["vendor/plotly.min.js"]
    assert re.fullmatch(r"/static/vendor/plotly\.min\.[0-9a-f]{12}\.js", plotly)
    for path in (css.group(1).decode(), plotly):
        status, headers, _length = _static(port, path)
        assert status == 200
        assert headers["Content-Encoding"] == "gzip"
        assert "immutable" in headers["Cache-Control"]
        assert "max-age=315360000" in headers["Cache-Control"]
    assert _static(port, plotly)[2] < 2_000_000  # compressed: about 1.5 MB of 4.8


def _start_up_ends_with_one_summary(output: str) -> None:
    """Said once, at the end of the start-up: the URL, the logins, the kubeconfigs and the
    derived audit key; no Celery banner, no traceback of a refusal."""
    assert output.count("Logins (password 'demo')") == 1
    assert output.count("AUDIT_MAC_KEY") == 1
    assert "-------------- celery@" not in output and "[tasks]" not in output
    summary = output.index("GPU quota portal: http://")
    assert output.index("Ctrl-C stops everything.") > summary
    assert "kube sandbox listening" in output[:summary]
    assert "Traceback" not in output


def test_run_portal_serves_login_page_and_stops_cleanly(tmp_path):
    port, sandbox_port = web_and_sandbox_ports()
    log = (tmp_path / "run.log").open("w+")
    proc = start_run_portal(
        tmp_path, "--port", str(port), "--sandbox-port", str(sandbox_port), stdout=log
    )
    try:
        deadline = time.monotonic() + 180
        status, body = _wait_for(f"http://127.0.0.1:{port}/login/", deadline)
        assert status == 200
        assert b'name="password"' in body
        _static_files_are_served_as_deployed(port, body, tmp_path)
        status, body = _wait_for(f"http://127.0.0.1:{port}/readyz", deadline)
        assert status == 200, body
        # The sandboxes want this run's token, kept in a file only its owner reads.
        token_file = tmp_path / "sandbox.token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        assert len(token) >= 40
        # The sandboxes serve HTTPS with a CA made for the demo; its keys are private too.
        tls_dir = tmp_path / "sandbox-tls"
        for key in ("ca.key", "server.key"):
            assert stat.S_IMODE((tls_dir / key).stat().st_mode) == 0o600
        trusted = ssl.create_default_context(cafile=str(tls_dir / "ca.crt"))
        # Each demo cluster has its own sandbox API server.
        for port_of_cluster in (sandbox_port, sandbox_port + 1):
            url = f"https://127.0.0.1:{port_of_cluster}/version"
            status, body = _wait_for(url, deadline, token=token, context=trusted)
            assert status == 200 and "gitVersion" in json.loads(body)
        assert (tmp_path / "portal.sqlite3").exists()
        namespaces = f"https://127.0.0.1:{sandbox_port}/api/v1/namespaces"
        assert _wait_for(namespaces, deadline, context=trusted)[0] == 401
        assert _wait_for(namespaces, deadline, token="not-" + token, context=trusted)[0] == 401
        # A client that does not trust the demo's CA is refused in the handshake.
        with pytest.raises(urllib.error.URLError) as untrusted:
            urllib.request.urlopen(namespaces, timeout=5)
        assert isinstance(untrusted.value.reason, ssl.SSLCertVerificationError)
        faults = urllib.request.Request(
            f"https://127.0.0.1:{sandbox_port}/sandbox/faults",
            data=b'{"kind": "drop"}',
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(faults, timeout=5, context=trusted)
        assert refused.value.code == 403
        # The worker pushes the demo plan to the sandbox clusters right away, with the token,
        # over TLS (the portal trusts the demo's CA).
        quota_url = f"{namespaces}/team-a-training/resourcequotas/gpu-quota"
        while True:
            status, body = _wait_for(quota_url, deadline, token=token, context=trusted)
            if status == 200:
                break
            assert time.monotonic() < deadline, "the demo plan never reached the sandbox"
            time.sleep(0.5)
        hard = json.loads(body)["spec"]["hard"]
        assert hard["requests.nvidia.com/gpu"] == "10"
        # kubectl reaches the sandbox through the kubeconfig written for the demo.
        kubeconfig = tmp_path / "kubeconfig-demo.yaml"
        assert stat.S_IMODE(kubeconfig.stat().st_mode) == 0o600
        result = run_kubectl(kubeconfig, "get", "resourcequotas", "-A", home=tmp_path)
        assert result.returncode == 0, result.stderr
        rows = [line.split()[:2] for line in result.stdout.splitlines()[1:]]
        assert ["team-a-training", "gpu-quota"] in rows
        assert (
            "namespace/team-a-training"
            in run_kubectl(kubeconfig, "get", "ns", "-o", "name", home=tmp_path).stdout.split()
        )
        # The demo's work runs on its sandbox: what each namespace held a week before.
        once = subprocess.run(
            [sys.executable, "manage.py", "demo_workload", "--once"],
            cwd=ROOT,
            env={
                **{k: v for k, v in os.environ.items() if k not in UNSET},
                "PORTAL_VAR_DIR": str(tmp_path),
                "KUBE_SANDBOX_TOKEN_FILE": str(token_file),
                "KUBE_SANDBOX_CA_FILE": str(tls_dir / "ca.crt"),
            },
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        held = {
            line.split()[0]: int(line.split()[-1])
            for line in once.stdout.splitlines()
            if "nvidia.com/gpu:" in line
        }
        assert set(held) == {"team-a-training", "team-b-inference", "team-c-dev"}, once.stdout
        pods = run_kubectl(
            kubeconfig,
            "get",
            "pods",
            "-A",
            "-l",
            "quota-portal.io/demo-work",
            "-o",
            "name",
            home=tmp_path,
        )
        assert pods.returncode == 0, pods.stderr
        assert len(pods.stdout.split()) == sum(held.values())
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        log.seek(0)
        output = log.read()
    assert code == 0, output
    _start_up_ends_with_one_summary(output)
    assert "admin, admin2" in output  # the demo logins are printed
    assert token not in output  # but never the token
    # The first start gave cluster demo its usage history, and says so once.
    assert output.count("Usage history of cluster demo: the repository's GPU trace") == 1
    assert (
        f"cluster demo: https://127.0.0.1:{sandbox_port} (token required; kubeconfig {kubeconfig})"
        in output
    )
    assert "Stopped." in output
    assert not port_open(port), "web server still running after Ctrl-C"
    assert not port_open(sandbox_port), "sandbox still running after Ctrl-C"
    assert not port_open(sandbox_port + 1), "sandbox still running after Ctrl-C"


def test_children_do_not_outlive_a_killed_run_portal(tmp_path):
    port, sandbox_port = web_and_sandbox_ports()
    proc = start_run_portal(tmp_path, "--port", str(port), "--sandbox-port", str(sandbox_port))
    try:
        _wait_for(f"http://127.0.0.1:{port}/login/", time.monotonic() + 180)
    finally:
        proc.kill()  # no chance to clean up: the children must go by themselves
        proc.wait(timeout=30)
    deadline = time.monotonic() + 20
    while port_open(port) or port_open(sandbox_port):
        assert time.monotonic() < deadline, "children outlived run_portal"
        time.sleep(0.3)


def test_run_portal_without_schemas_still_serves_the_portal(tmp_path):
    port = free_port()
    log = (tmp_path / "run.log").open("w+")
    proc = start_run_portal(
        tmp_path,
        "--port",
        str(port),
        stdout=log,
        KUBE_SCHEMA_DIR=str(tmp_path / "no-schemas-here"),
    )
    try:
        status, _ = _wait_for(f"http://127.0.0.1:{port}/login/", time.monotonic() + 180)
        assert status == 200
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
        log.seek(0)
        output = log.read()
    assert code == 0, output
    assert "Not starting the sandbox clusters" in output


def test_run_real_without_a_built_control_plane_says_how_to_build_it(tmp_path):
    port, sandbox_port = web_and_sandbox_ports()
    empty_cache = tmp_path / "no-controlplane"
    empty_cache.mkdir()
    log = (tmp_path / "run.log").open("w+")
    proc = start_run_portal(
        tmp_path,
        "--real-cluster",
        "--port",
        str(port),
        "--sandbox-port",
        str(sandbox_port),
        stdout=log,
        PORTAL_CONTROLPLANE_CACHE=str(empty_cache),
    )
    code = proc.wait(timeout=120)
    log.seek(0)
    output = log.read()
    assert code != 0
    assert "make controlplane" in output and "Traceback" not in output, output
    assert not port_open(port)
