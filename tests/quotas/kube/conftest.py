"""Fixtures for tests that talk to a Kubernetes API: the sandbox server and a client for it.

``kube_sandbox`` starts a fresh :class:`~quotas.kube.sandbox.SandboxServer` on a free local port
(in a background thread, in memory, no token) and stops it after the test; use
``kube_sandbox.url``, ``kube_sandbox.write_kubeconfig(path)``, ``kube_sandbox.stats`` and
``kube_sandbox.faults``. ``kube_client`` is an official ``kubernetes.client.ApiClient`` configured
for it (the client's default retries; use ``api_client_for(server, retries=0)``
to see every injected fault).

Tests elsewhere in the project can reuse them with
``from tests.quotas.kube.conftest import kube_client, kube_sandbox  # noqa: F401``.
Neither needs the database.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client as k8s

from quotas.kube.sandbox import SandboxServer


@pytest.fixture
def kube_sandbox() -> Iterator[SandboxServer]:
    """A running sandbox API server with only the default namespaces; stopped afterwards."""
    server = SandboxServer(host="127.0.0.1", port=0).start()
    try:
        yield server
    finally:
        server.stop()


def api_client_for(server: SandboxServer, *, retries: int | None = None) -> k8s.ApiClient:
    """An official-client ApiClient for ``server`` (with its bearer token, if it has one)."""
    configuration = k8s.Configuration()
    configuration.host = server.url
    configuration.retries = retries
    if server.token:
        configuration.api_key = {"authorization": f"Bearer {server.token}"}
    return k8s.ApiClient(configuration)


@pytest.fixture
def kube_client(kube_sandbox: SandboxServer) -> Iterator[k8s.ApiClient]:
    """``kubernetes.client.ApiClient`` pointed at ``kube_sandbox``; closed afterwards."""
    api_client = api_client_for(kube_sandbox)
    try:
        yield api_client
    finally:
        api_client.close()
