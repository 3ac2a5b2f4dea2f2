"""`make run`: migrate, load the demo, then run sandbox cluster, web, worker and beat together.

One foreground command; Ctrl-C (or SIGTERM) stops every child cleanly. If one child dies the
others are stopped too, so a half-running demo never lingers.

`make run-real` (``--real-cluster``): the demo cluster ``demo`` is the real control plane
(``controlplane/``, built by ``make controlplane``) instead of a sandbox, with GPU work submitted
once the approved quota is in force (``controlplane/demo.py``); the other demo clusters stay on
the sandbox (they share namespace names with ``demo``, and a cluster is its own API server).
"""

import contextlib
import hashlib
import io
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from common.processes import die_with_parent

STOP_GRACE_SECONDS = 10
# The demo cluster that --real-cluster puts on the real control plane.
REAL_DEMO_CLUSTER = "demo"
REAL_SYNC_TIMEOUT_SECONDS = 180


def _write_token_file(path: Path) -> Path:
    """A fresh random bearer token in ``path``, readable by the owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        os.fchmod(fh.fileno(), 0o600)  # a file left by an earlier run keeps its old mode otherwise
        fh.write(secrets.token_urlsafe(32) + "\n")
    return path


AUDIT_KEY_NOTE = (
    "Audit log: AUDIT_MAC_KEY is not set, so it is MACed with a key derived from "
    "DJANGO_SECRET_KEY (fine for the demo only)."
)


def _static_sources_digest() -> str:
    """A digest of every static source file's name, size and modification time, as the
    finders list them: equal, and the collected files are still those of the sources."""
    from django.contrib.staticfiles.finders import get_finders

    digest = hashlib.sha256()
    for finder in get_finders():
        for path, storage in sorted(finder.list([]), key=lambda found: found[0]):
            info = os.stat(storage.path(path))
            digest.update(f"{path}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()


class Command(BaseCommand):
    help = "Run the whole portal locally: sandbox Kubernetes API, web, Celery worker and beat."
    # Run by handle itself, so that what they find is said once, in the summary.
    requires_system_checks = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument(
            "--sandbox-port",
            type=int,
            default=int(os.environ.get("SANDBOX_PORT", "8001")),
            help="Port of the first sandbox Kubernetes API; each sandbox cluster gets the next.",
        )
        parser.add_argument("--no-sandbox", action="store_true", help="Do not start the sandbox.")
        parser.add_argument("--no-seed", action="store_true", help="Skip seed_demo.")
        parser.add_argument("--web-workers", type=int, default=2)
        parser.add_argument(
            "--real-cluster",
            action="store_true",
            help=f"Run cluster {REAL_DEMO_CLUSTER} on the real control plane (make controlplane "
            "first) and submit GPU work to it; the other demo clusters stay on the sandbox.",
        )

    def _check_notes(self) -> list[str]:
        """Django's system checks: errors stop the run; the rest become lines of the summary
        (the derived audit key one line of its own, said nowhere else)."""
        from django.core import checks

        from quotas.audit.chain import audit_mac_key_is_derived, audit_mac_key_notice_given

        found = checks.run_checks(include_deployment_checks=False)
        errors = [m for m in found if m.is_serious()]
        if errors:
            raise CommandError("; ".join(str(m) for m in errors))
        notes = [str(m) for m in found if m.id != "quotas.W001"]
        if audit_mac_key_is_derived():
            notes.append(AUDIT_KEY_NOTE)
            audit_mac_key_notice_given()
        return notes

    def _wait_for_web(self, bind: str, web, timeout: float = 60) -> None:
        """Until the web server answers (or has died): the summary comes after its start-up."""
        host, port = bind.rsplit(":", 1)
        if host in ("0.0.0.0", "", "::"):  # noqa: S104 (a bound-everywhere server, asked locally)
            host = "127.0.0.1"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and web.poll() is None:
            try:
                with urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=2):
                    return
            except OSError:
                time.sleep(0.3)

    def _collect_static(self, env: dict, root: Path) -> None:
        """The static files as deployed: collected under hashed names, gzipped, served by
        WhiteNoise from the folder with a year's immutable cache (plotly.js is 4.8 MB
        uncompressed). Collected again only when a source file changed since the last run."""
        env.update(
            {
                "PORTAL_MANIFEST_STATIC": "true",
                "PORTAL_STATIC_ROOT": str(root),
                "WHITENOISE_USE_FINDERS": "false",
            }
        )
        stamp = root / "sources.sha256"
        sources = _static_sources_digest()
        collected = (root / "staticfiles.json").exists() and stamp.exists()
        if collected and stamp.read_text() == sources:
            return
        subprocess.run(
            [sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"],
            env=env,
            cwd=settings.BASE_DIR,
            check=True,
        )
        stamp.write_text(sources)

    def handle(self, *args, **options) -> None:
        if options["real_cluster"]:
            # Said before the minute of migrating and loading the demo, not after it.
            self._require_control_plane()
        # The system checks' findings are said once, in the summary at the end.
        self._notes = self._check_notes()
        call_command("migrate", interactive=False, verbosity=0, skip_checks=True)
        if not options["no_seed"]:
            # Its logins are in the summary at the end.
            call_command("seed_demo", stdout=io.StringIO())
            # The first start gives cluster demo its usage history (the repository's trace):
            # charts, canary metrics, suggestions and their backtest from the first visit.
            self._demo_history()

        env = os.environ.copy()
        env.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
        var_dir = Path(settings.VAR_DIR)
        tls_dir = var_dir / "sandbox-tls"
        bind = f"{options['host']}:{options['port']}"

        control_plane = None
        if options["real_cluster"]:
            control_plane = self._start_control_plane(var_dir)
        try:
            self._run(options, env, var_dir, tls_dir, bind, control_plane)
        finally:
            if control_plane is not None:
                control_plane.stop()

    def _demo_history(self) -> None:
        from django.utils import timezone

        from quotas.models import Cluster
        from usage.demo_history import demo_history_import

        demo = Cluster.objects.filter(name="demo").first()
        history = demo and demo_history_import(cluster=demo, today=timezone.localdate())
        if history:
            self._notes.append(
                f"Usage history of cluster demo: the repository's GPU trace, {history.start} "
                f"to {history.end} ({history.samples:,} samples); last month's suggestions "
                "and their backtest are on /suggestions/."
            )

    def _run(self, options, env, var_dir, tls_dir, bind, control_plane) -> None:
        python = sys.executable
        self._collect_static(env, var_dir / "static")
        commands: dict[str, list[str]] = {}
        sandboxes = {}
        if not options["no_sandbox"] and self._schemas_present():
            sandboxes = self._sandbox_clusters(options["sandbox_port"])
        if sandboxes:
            # Any local process could otherwise change the demo's clusters: a new token per run,
            # handed to the children (and this process) as a file path, never on a command line.
            token_file = _write_token_file(var_dir / "sandbox.token")
            env["KUBE_SANDBOX_TOKEN_FILE"] = str(token_file)
            settings.KUBE_SANDBOX_TOKEN_FILE = str(token_file)
            # Over TLS, as kubectl sends the token to no http:// server. Made (or kept) here
            # before any sandbox starts, so the sandboxes share one CA that the portal trusts.
            from kubesandbox.tls import ensure_certificates

            tls = ensure_certificates(tls_dir)
            env["KUBE_SANDBOX_CA_FILE"] = str(tls.ca_cert)
            settings.KUBE_SANDBOX_CA_FILE = str(tls.ca_cert)
        for name, port in sandboxes.items():
            commands[f"sandbox:{name}"] = [
                python,
                "-m",
                "kubesandbox",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--state-file",
                str(var_dir / f"sandbox-{name}.json"),
                "--token-file",
                str(token_file),
                "--kubeconfig-out",
                str(var_dir / f"kubeconfig-{name}.yaml"),
                "--tls-dir",
                str(tls_dir),
            ]
        commands["web"] = [
            python,
            "-m",
            "gunicorn",
            "portal.wsgi",
            "--bind",
            bind,
            "--workers",
            str(options["web_workers"]),
            "--threads",
            "4",
            "--access-logfile",
            "-",
            "--graceful-timeout",
            "5",
            # Several portals (or test runs) on one machine must not share a control socket.
            "--no-control-socket",
        ]
        commands["worker"] = [
            python,
            "-m",
            "celery",
            "-A",
            "portal",
            "--quiet",  # no banner: the summary is the start-up's last word
            "worker",
            "--pool",
            "solo",
            "--loglevel",
            "WARNING",
        ]
        commands["beat"] = [
            python,
            "-m",
            "celery",
            "-A",
            "portal",
            "--quiet",
            "beat",
            "--loglevel",
            "WARNING",
            "--scheduler",
            "django_celery_beat.schedulers:DatabaseScheduler",
            "--pidfile",
            "",
        ]

        if "demo" in sandboxes and control_plane is None:
            # What the demo's teams use now moves as their history did a week before.
            commands["demo-work"] = [python, "manage.py", "demo_workload", "--cluster", "demo"]

        children: dict[str, subprocess.Popen] = {}
        self._stopping = False

        def request_stop(signum, _frame) -> None:
            self._stopping = True

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)

        for name, command in commands.items():
            # Own process group: Ctrl-C reaches us once, and we stop the children in order.
            children[name] = subprocess.Popen(
                command,
                env=env,
                cwd=settings.BASE_DIR,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        if sandboxes:
            self._prepare_sandboxes()
        # Push the demo plan to its clusters now rather than at beat's first tick (the real
        # control plane is new each run: synced whenever it was last).
        from quotas.models import Cluster, SyncRun
        from quotas.tasks import reconcile_clusters, sync_cluster

        last_run = SyncRun.objects.order_by("-id").values_list("id", flat=True).first() or 0
        reconcile_clusters.delay()
        if control_plane is not None:
            real = Cluster.objects.get(name=REAL_DEMO_CLUSTER)
            sync_cluster.delay(real.pk, SyncRun.Trigger.RECONCILE)
            self._submit_demo_work(control_plane, after_run=last_run)

        self._wait_for_web(bind, children["web"])
        self.stdout.write(
            "\n"
            + "-" * 72
            + "\n"
            + self.style.SUCCESS(f"GPU quota portal: http://{bind}/")
            + "\nLogins (password 'demo'): admin, admin2 (platform admins), "
            "lead-a, lead-b, lead-c (team leads), viewer (auditor)."
            + "".join(
                f"\nSandbox Kubernetes API of cluster {name}: https://127.0.0.1:{port}"
                f" (token required; kubeconfig {var_dir / f'kubeconfig-{name}.yaml'})"
                for name, port in sandboxes.items()
            )
            + (
                f"\nReal control plane of cluster {REAL_DEMO_CLUSTER}: {control_plane.server}"
                f"\n  export KUBECONFIG={control_plane.kubeconfig}"
                f"\n  {Path(sys.executable).parent / 'kubectl'} get pods -A --watch"
                if control_plane is not None
                else ""
            )
            + "".join(f"\n{note}" for note in self._notes)
            + "\nCtrl-C stops everything.\n"
            + "-" * 72
            + "\n"
        )
        self.stdout.flush()

        exit_code = 0
        try:
            while not self._stopping:
                for name, child in children.items():
                    if child.poll() is not None:
                        self.stderr.write(f"{name} exited with code {child.returncode}; stopping.")
                        exit_code = 1
                        self._stopping = True
                        break
                time.sleep(0.3)
        finally:
            self._stop(children)
        if exit_code:
            sys.exit(exit_code)
        self.stdout.write("Stopped.")

    def _require_control_plane(self) -> None:
        try:
            from controlplane.launcher import available
        except ImportError as exc:
            raise CommandError(f"--real-cluster needs the controlplane package: {exc}") from exc
        if not available():
            raise CommandError(
                "--real-cluster: the control plane is not built; run `make controlplane` "
                "(needs Go 1.26, about 11 minutes the first time)"
            )

    def _start_control_plane(self, var_dir: Path):
        """The real control plane, fresh (its etcd and certificates made anew each run), with
        cluster ``demo`` pointed at it (handle() has made sure it is built)."""
        from controlplane.launcher import ControlPlane
        from quotas.models import Cluster

        workdir = var_dir / "controlplane"
        shutil.rmtree(workdir, ignore_errors=True)
        workdir.mkdir(parents=True, mode=0o700)
        control_plane = ControlPlane(workdir)
        control_plane.start()
        updated = Cluster.objects.filter(name=REAL_DEMO_CLUSTER).update(
            connection=Cluster.Connection.KUBECONFIG,
            kubeconfig_path=str(control_plane.kubeconfig),
            kubeconfig_context="controlplane",
        )
        if not updated:
            control_plane.stop()
            raise CommandError(f"--real-cluster: no cluster {REAL_DEMO_CLUSTER} (run seed_demo)")
        return control_plane

    def _submit_demo_work(self, control_plane, after_run: int) -> None:
        """Once the worker's first sync of the real cluster succeeded and its quota is in
        force, the demo's GPU work; a sync that does not succeed is reported, not fatal."""
        from controlplane import demo
        from controlplane.launcher import ControlPlaneError
        from quotas.models import SyncRun

        deadline = time.monotonic() + REAL_SYNC_TIMEOUT_SECONDS
        while True:
            run = (
                SyncRun.objects.filter(cluster__name=REAL_DEMO_CLUSTER, id__gt=after_run)
                .exclude(status__in=[SyncRun.Status.RUNNING, SyncRun.Status.SKIPPED])
                .order_by("-id")
                .first()
            )
            if run is not None and run.status == SyncRun.Status.SUCCEEDED:
                break
            if self._stopping:
                return
            if time.monotonic() > deadline:
                last = f"last sync {run.status}: {run.error}" if run else "no sync finished"
                self.stderr.write(f"Not submitting the demo's GPU work: {last}.")
                return
            time.sleep(1)
        try:
            if not demo.wait_until_enforced(control_plane, stop=lambda: self._stopping):
                return
            created = demo.submit(control_plane, stop=lambda: self._stopping)
        except ControlPlaneError as exc:
            self.stderr.write(f"Not submitting the demo's GPU work: {exc}")
            return
        self.stdout.write("GPU work submitted to the real control plane: " + ", ".join(created))

    def _schemas_present(self) -> bool:
        """The sandbox is a development tool (not in the product image) that validates against
        the schemas kept beside it; without it the portal still runs (syncs to the demo clusters
        then fail visibly instead of the whole demo)."""
        try:
            import kubesandbox.tls  # noqa: F401 (the sandboxes serve TLS: needs cryptography)
            from kubesandbox.schemas import SchemaDirNotFound, schema_dir
        except ImportError as exc:
            self.stderr.write(f"Not starting the sandbox clusters: {exc}")
            return False
        try:
            schema_dir()
        except SchemaDirNotFound as exc:
            self.stderr.write(f"Not starting the sandbox clusters: {exc}")
            return False
        return True

    def _sandbox_clusters(self, first_port: int) -> dict[str, int]:
        """One sandbox API server per sandbox cluster (each cluster is its own API server, as
        namespaces of the same name live on several clusters); points the clusters at them."""
        from quotas.models import Cluster

        ports = {}
        clusters = Cluster.objects.filter(connection=Cluster.Connection.SANDBOX).order_by("name")
        for offset, cluster in enumerate(clusters):
            port = first_port + offset
            url = f"https://127.0.0.1:{port}"
            if cluster.sandbox_url != url:
                Cluster.objects.filter(pk=cluster.pk).update(sandbox_url=url)
            ports[cluster.name] = port
        return ports

    def _prepare_sandboxes(self) -> None:
        """Wait for the sandboxes; give YuniKorn clusters the namespace its installer makes."""
        from quotas.kube.client import KubeConflict, KubeError, client_for_cluster
        from quotas.models import Cluster

        deadline = time.monotonic() + 30
        for cluster in Cluster.objects.filter(connection=Cluster.Connection.SANDBOX):
            kube = client_for_cluster(cluster, timeout=2)
            try:
                while True:
                    try:
                        kube.request("GET", "/version")
                        break
                    except KubeError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.2)
                if cluster.yunikorn_enabled:
                    namespace = {
                        "apiVersion": "v1",
                        "kind": "Namespace",
                        "metadata": {"name": cluster.yunikorn_namespace},
                    }
                    with contextlib.suppress(KubeConflict):
                        kube.create(namespace)
            finally:
                kube.close()

    def _stop(self, children: dict[str, subprocess.Popen]) -> None:
        # Web first (no new work), then beat, worker and the demo's work, then the clusters
        # they talk to.
        order = [n for n in ("web", "beat", "worker", "demo-work") if n in children]
        order += [n for n in children if n.startswith("sandbox:")]
        for name in order:
            child = children[name]
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for name in order:
            child = children[name]
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
