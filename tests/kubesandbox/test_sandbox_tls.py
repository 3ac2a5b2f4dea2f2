"""The sandbox over HTTPS: its own CA and server certificate, kubectl with the bearer token (which
kubectl sends only over TLS), the portal's sandbox connection trusting the CA, and clients that do
not trust it refused."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
import socket
import ssl
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from io import StringIO
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from cryptography import x509
from django.core.management import call_command

from kubesandbox import SandboxServer
from kubesandbox import tls as sandbox_tls
from kubesandbox.tls import ensure_certificates
from quotas.kube.client import KubeConfigError, client_for_cluster
from quotas.kube.sync import cluster_sync
from quotas.models import Cluster, SyncRun
from tests.support.kube import kubectl_binary
from tests.support.waiting import poll

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "tls-sandbox-token-value"
TLS_WITH_TOKEN = pytest.mark.parametrize(
    "kube_sandbox", [{"tls": True, "token": TOKEN}], indirect=True
)
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-x"}}


def run_kubectl(kubeconfig: Path, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [kubectl_binary(), "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KUBECACHEDIR": str(home / "cache"), "HOME": str(home)},
        check=False,
    )


def edit_kubeconfig(path: Path, target: Path, change) -> Path:
    config = yaml.safe_load(path.read_text())
    change(config)
    target.write_text(yaml.safe_dump(config))
    return target


def certificate(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


# -- the certificates ---------------------------------------------------------------------


def test_ca_and_server_certificate_for_the_sandbox_addresses(tmp_path):
    files = ensure_certificates(tmp_path / "tls")
    for key in (files.ca_key, files.server_key):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    ca, server = certificate(files.ca_cert), certificate(files.server_cert)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    server.verify_directly_issued_by(ca)
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(names.get_values_for_type(x509.IPAddress)) == {
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    }
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]


def test_valid_certificates_are_reused(tmp_path):
    files = ensure_certificates(tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    ensure_certificates(tmp_path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert files.ca_pem() == before["ca.crt"]


def test_a_broken_or_foreign_server_certificate_is_replaced_under_the_same_ca(tmp_path):
    files = ensure_certificates(tmp_path / "tls")
    ca = files.ca_cert.read_bytes()
    files.server_cert.write_text("not a certificate")
    ensure_certificates(files.directory)
    certificate(files.server_cert).verify_directly_issued_by(certificate(files.ca_cert))
    # A server certificate (and key) from another CA.
    other = ensure_certificates(tmp_path / "other")
    files.server_cert.write_bytes(other.server_cert.read_bytes())
    files.server_key.write_bytes(other.server_key.read_bytes())
    ensure_certificates(files.directory)
    assert files.server_cert.read_bytes() != other.server_cert.read_bytes()
    certificate(files.server_cert).verify_directly_issued_by(certificate(files.ca_cert))
    assert files.ca_cert.read_bytes() == ca
    # The key file replaced under an old, wider mode is 0600 again.
    assert stat.S_IMODE(files.server_key.stat().st_mode) == 0o600


def test_an_expiring_ca_is_replaced_with_its_server_certificate(tmp_path):
    files = ensure_certificates(tmp_path)
    # A CA made so long ago that it expires in a day.
    made = sandbox_tls._now() - sandbox_tls.CA_LIFETIME + datetime.timedelta(days=1)
    old_ca = sandbox_tls._new_ca(made)
    assert old_ca[0].not_valid_after_utc > sandbox_tls._now()
    sandbox_tls._write_key(files.ca_key, old_ca[1])
    sandbox_tls._write_cert(files.ca_cert, old_ca[0])
    old_pem = files.ca_cert.read_bytes()
    ensure_certificates(tmp_path)
    assert files.ca_cert.read_bytes() != old_pem
    certificate(files.server_cert).verify_directly_issued_by(certificate(files.ca_cert))


def test_sandboxes_starting_together_share_one_ca(tmp_path):
    """make run starts one sandbox per demo cluster on one directory: one CA must come out,
    its key matching it, and every server certificate issued by it."""
    directory = tmp_path / "tls"
    servers = [SandboxServer(tls_dir=directory) for _ in range(4)]
    barrier = threading.Barrier(len(servers))
    errors: list[BaseException] = []

    def start(server: SandboxServer) -> None:
        barrier.wait()
        try:
            server.start()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(s,)) for s in servers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    try:
        assert errors == []
        context = ssl.create_default_context(cafile=str(directory / "ca.crt"))
        for server in servers:
            with urllib.request.urlopen(f"{server.url}/version", context=context) as response:
                assert response.status == 200
        files = sandbox_tls.TlsFiles(directory)
        assert sandbox_tls._load_valid_ca(files, sandbox_tls._now()) is not None
    finally:
        for server in servers:
            server.stop()


# -- kubectl --------------------------------------------------------------------------------


@TLS_WITH_TOKEN
@pytest.mark.django_db
def test_kubectl_with_the_written_kubeconfig_applies_the_demo_export(kube_sandbox, tmp_path):
    assert kube_sandbox.url.startswith("https://127.0.0.1:")
    kubeconfig = kube_sandbox.write_kubeconfig(tmp_path / "kubeconfig")
    config = yaml.safe_load(kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    assert cluster["server"] == kube_sandbox.url
    assert base64.b64decode(cluster["certificate-authority-data"]) == (
        kube_sandbox.ca_file.read_bytes()
    )
    assert config["users"][0]["user"] == {"token": TOKEN}

    listed = run_kubectl(kubeconfig, "get", "ns", "-o", "name", home=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "namespace/default" in listed.stdout.split()

    call_command("seed_demo", verbosity=0, stdout=StringIO())
    export = StringIO()
    call_command("export_manifests", "--cluster", "demo", stdout=export)
    manifests = tmp_path / "demo.yaml"
    manifests.write_text(export.getvalue())
    applied = run_kubectl(kubeconfig, "apply", "-f", str(manifests), home=tmp_path)
    assert applied.returncode == 0, applied.stderr
    assert "resourcequota/gpu-quota created" in applied.stdout

    quotas = run_kubectl(kubeconfig, "get", "resourcequotas", "-A", home=tmp_path)
    assert quotas.returncode == 0, quotas.stderr
    rows = [line.split() for line in quotas.stdout.splitlines()[1:]]
    assert ["team-a-training", "gpu-quota"] in [row[:2] for row in rows]
    quota = kube_sandbox.get_object("v1", "ResourceQuota", "gpu-quota", "team-a-training")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "10"


@TLS_WITH_TOKEN
def test_kubectl_without_the_token_is_unauthorized(kube_sandbox, tmp_path):
    kubeconfig = kube_sandbox.write_kubeconfig(tmp_path / "kubeconfig")

    def no_token(config):
        # Other credentials instead (with none at all, kubectl asks for a password).
        config["users"][0]["user"] = {"username": "someone", "password": "guess"}

    def wrong_token(config):
        config["users"][0]["user"] = {"token": "not-" + TOKEN}

    for change in (no_token, wrong_token):
        edited = edit_kubeconfig(kubeconfig, tmp_path / "edited", change)
        result = run_kubectl(edited, "get", "ns", "-v=6", home=tmp_path)
        assert result.returncode != 0
        assert "You must be logged in to the server" in result.stderr, result.stderr
        assert '"code": 401' in result.stderr, result.stderr
        assert '"reason": "Unauthorized"' in result.stderr, result.stderr
    # Refused before the API: nothing was served.
    assert kube_sandbox.stats.as_dict()["requests_total"] == 0


@TLS_WITH_TOKEN
def test_kubectl_that_does_not_trust_the_ca_is_refused(kube_sandbox, tmp_path):
    kubeconfig = kube_sandbox.write_kubeconfig(tmp_path / "kubeconfig")

    def drop_ca(config):
        del config["clusters"][0]["cluster"]["certificate-authority-data"]

    edited = edit_kubeconfig(kubeconfig, tmp_path / "edited", drop_ca)
    result = run_kubectl(edited, "get", "ns", home=tmp_path)
    assert result.returncode != 0
    assert "certificate signed by unknown authority" in result.stderr, result.stderr


# -- the portal's sandbox connection ---------------------------------------------------------


@pytest.fixture
def sandbox_connection(kube_sandbox, settings, tmp_path, alloc_a):
    """The demo cluster on the TLS sandbox, the token and CA files set as make run sets them."""
    token_file = tmp_path / "sandbox.token"
    token_file.write_text(TOKEN + "\n")
    settings.KUBE_SANDBOX_TOKEN_FILE = str(token_file)
    settings.KUBE_SANDBOX_CA_FILE = str(kube_sandbox.ca_file)
    cluster = alloc_a.team_namespace.cluster
    Cluster.objects.filter(pk=cluster.pk).update(
        connection=Cluster.Connection.SANDBOX, sandbox_url=kube_sandbox.url
    )
    cluster.refresh_from_db()
    return cluster


@TLS_WITH_TOKEN
@pytest.mark.django_db
def test_portal_sandbox_connection_trusts_the_demo_ca(kube_sandbox, sandbox_connection):
    kube = client_for_cluster(sandbox_connection)
    try:
        kube.create(NAMESPACE)
        names = {ns["metadata"]["name"] for ns in kube.list("v1", "Namespace")}
    finally:
        kube.close()
    assert "team-x" in names
    # The sync goes the same way.
    run = cluster_sync(cluster_id=sandbox_connection.pk)
    assert run.status == SyncRun.Status.SUCCEEDED, run.error
    quota = kube_sandbox.get_object("v1", "ResourceQuota", "gpu-quota", "team-a-training")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "10"


@TLS_WITH_TOKEN
@pytest.mark.django_db
def test_a_connection_that_does_not_trust_the_ca_is_refused(
    kube_sandbox, sandbox_connection, settings, tmp_path
):
    other_ca = ensure_certificates(tmp_path / "other").ca_cert
    for ca_file in ("", str(other_ca)):  # the system's CAs, then another CA
        settings.KUBE_SANDBOX_CA_FILE = ca_file
        kube = client_for_cluster(sandbox_connection)
        try:
            with pytest.raises(KubeConfigError, match="certificate verify failed") as refused:
                kube.list("v1", "Namespace")
            assert not refused.value.transient
        finally:
            kube.close()
    # The sync fails for good (retrying does not fix a CA), saying why.
    run = cluster_sync(cluster_id=sandbox_connection.pk)
    assert run.status == SyncRun.Status.FAILED
    assert "certificate verify failed" in run.error
    # Refused in the handshake: no request reached the API.
    assert kube_sandbox.stats.as_dict()["requests_total"] == 0


@TLS_WITH_TOKEN
@pytest.mark.django_db
def test_a_missing_ca_file_is_a_configuration_error_naming_it(sandbox_connection, settings):
    settings.KUBE_SANDBOX_CA_FILE = "/nonexistent/ca.crt"
    with pytest.raises(
        KubeConfigError, match=r"sandbox CA file /nonexistent/ca\.crt not found"
    ) as e:
        client_for_cluster(sandbox_connection)
    assert not e.value.transient


@TLS_WITH_TOKEN
def test_plain_python_clients_refuse_the_sandbox_without_its_ca(kube_sandbox):
    with pytest.raises(urllib.error.URLError) as refused:
        urllib.request.urlopen(f"{kube_sandbox.url}/version", timeout=5)
    assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)
    assert "certificate verify failed" in str(refused.value.reason)
    # Plain HTTP to the TLS port gets no answer from the API either.
    plain = kube_sandbox.url.replace("https://", "http://")
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(f"{plain}/version", timeout=5)


@TLS_WITH_TOKEN
def test_a_client_stuck_before_its_handshake_holds_up_nobody(kube_sandbox):
    context = ssl.create_default_context(cafile=str(kube_sandbox.ca_file))
    request = urllib.request.Request(
        f"{kube_sandbox.url}/api/v1/namespaces", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    port = urlsplit(kube_sandbox.url).port
    with socket.create_connection(("127.0.0.1", port)):  # connects, never says hello
        # Once the server has accepted it (and its thread waits for the handshake).
        poll("the silent connection accepted", lambda: kube_sandbox._httpd.connections, 10, 0.01)
        started = time.monotonic()
        with urllib.request.urlopen(request, context=context, timeout=5) as response:
            assert response.status == 200
        assert time.monotonic() - started < 2


# -- the command line ------------------------------------------------------------------------


def test_command_line_serves_https_and_writes_a_kubeconfig_kubectl_uses(tmp_path):
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
        "--tls-dir",
        str(tmp_path / "tls"),
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "listening on https://127.0.0.1:" in line, line
        assert line.rstrip().endswith(f"CA {tmp_path / 'tls' / 'ca.crt'})")
        result = run_kubectl(kubeconfig, "get", "ns", "-o", "name", home=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "namespace/kube-system" in result.stdout.split()
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def test_command_line_names_an_unusable_tls_directory(tmp_path):
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    result = subprocess.run(
        [sys.executable, "-m", "kubesandbox", "--port", "0", "--tls-dir", str(not_a_directory)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 2
    assert f"cannot use the TLS directory {not_a_directory}" in result.stderr
