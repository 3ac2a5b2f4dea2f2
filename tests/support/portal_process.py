"""`manage.py run_portal` as `make run` starts it, from the outside: ports, the process, kubectl
against its sandboxes."""

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.support.kube import kubectl_binary
from tests.support.net import free_port

ROOT = Path(__file__).resolve().parents[2]


# A bare machine: no database or broker configured, everything under a fresh folder.
UNSET = ("DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "CELERY_BROKER_FOLDER")


def free_port_after(port: int) -> bool:
    """Whether the port after `port` is free too (the second demo cluster's sandbox)."""
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port + 1))
        except OSError:
            return False
    return True


def port_open(port: int) -> bool:
    """Whether anything still listens there (HTTP or HTTPS alike)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def run_kubectl(kubeconfig: Path, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [kubectl_binary(), "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KUBECACHEDIR": str(home / "kube-cache"), "HOME": str(home)},
        check=False,
    )


def web_and_sandbox_ports() -> tuple[int, int]:
    """A web port and a first sandbox port whose next port is free too."""
    port, sandbox_port = free_port(), free_port()
    while free_port_after(sandbox_port) is False:
        sandbox_port = free_port()
    return port, sandbox_port


def start_run_portal(
    tmp_path, *args: str, stdout=subprocess.DEVNULL, **env_extra
) -> subprocess.Popen:
    """run_portal as `make run` starts it, on a bare machine's settings."""
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env.update(
        {"PORTAL_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "portal.settings", **env_extra}
    )
    return subprocess.Popen(
        [sys.executable, "manage.py", "run_portal", "--web-workers", "1", *args],
        cwd=ROOT,
        env=env,
        stdout=stdout,
        stderr=subprocess.STDOUT,
    )
