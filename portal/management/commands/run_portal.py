"""`make run`: migrate, load the demo, then run sandbox cluster, web, worker and beat together.

One foreground command; Ctrl-C (or SIGTERM) stops every child cleanly. If one child dies the
others are stopped too, so a half-running demo never lingers.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

STOP_GRACE_SECONDS = 10


class Command(BaseCommand):
    help = "Run the whole portal locally: sandbox Kubernetes API, web, Celery worker and beat."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument(
            "--sandbox-port",
            type=int,
            default=int(os.environ.get("SANDBOX_PORT", "8001")),
            help="Port of the sandbox Kubernetes API (the demo clusters point at it).",
        )
        parser.add_argument("--no-sandbox", action="store_true", help="Do not start the sandbox.")
        parser.add_argument("--no-seed", action="store_true", help="Skip seed_demo.")
        parser.add_argument("--web-workers", type=int, default=2)

    def handle(self, *args, **options) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("Database migrated.")
        if not options["no_seed"]:
            call_command("seed_demo", stdout=self.stdout)

        python = sys.executable
        manage = str(Path(settings.BASE_DIR) / "manage.py")
        env = os.environ.copy()
        env.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
        sandbox_url = f"http://127.0.0.1:{options['sandbox_port']}"
        if not options["no_sandbox"]:
            env["KUBE_SANDBOX_URL"] = sandbox_url
        var_dir = Path(settings.VAR_DIR)
        bind = f"{options['host']}:{options['port']}"

        commands: dict[str, list[str]] = {}
        if not options["no_sandbox"]:
            commands["sandbox"] = [
                python, manage, "kube_sandbox",
                "--host", "127.0.0.1",
                "--port", str(options["sandbox_port"]),
                "--state-file", str(var_dir / "sandbox-state.json"),
            ]  # fmt: skip
        commands["web"] = [
            python, "-m", "gunicorn", "portal.wsgi",
            "--bind", bind,
            "--workers", str(options["web_workers"]),
            "--threads", "4",
            "--access-logfile", "-",
            "--graceful-timeout", "5",
        ]  # fmt: skip
        commands["worker"] = [
            python, "-m", "celery", "-A", "portal", "worker",
            "--pool", "solo", "--loglevel", "INFO",
        ]  # fmt: skip
        commands["beat"] = [
            python, "-m", "celery", "-A", "portal", "beat",
            "--loglevel", "INFO",
            "--scheduler", "django_celery_beat.schedulers:DatabaseScheduler",
            "--pidfile", "",
        ]  # fmt: skip

        children: dict[str, subprocess.Popen] = {}
        stopping = False

        def request_stop(signum, _frame) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)

        for name, command in commands.items():
            # Own process group: Ctrl-C reaches us once, and we stop the children in order.
            children[name] = subprocess.Popen(
                command, env=env, cwd=settings.BASE_DIR, start_new_session=True
            )

        self.stdout.write(
            self.style.SUCCESS(f"\nGPU quota portal: http://{bind}/")
            + "\nLogins (password 'demo'): admin, admin2 (platform admins), "
            "lead-a, lead-b, lead-c (team leads), viewer (auditor)."
            + (f"\nSandbox Kubernetes API: {sandbox_url}" if "sandbox" in children else "")
            + "\nCtrl-C stops everything.\n"
        )
        self.stdout.flush()

        exit_code = 0
        try:
            while not stopping:
                for name, child in children.items():
                    if child.poll() is not None:
                        self.stderr.write(f"{name} exited with code {child.returncode}; stopping.")
                        exit_code = 1
                        stopping = True
                        break
                time.sleep(0.3)
        finally:
            self._stop(children)
        if exit_code:
            sys.exit(exit_code)
        self.stdout.write("Stopped.")

    def _stop(self, children: dict[str, subprocess.Popen]) -> None:
        # Web first (no new work), then beat and worker, then the cluster they talk to.
        order = [n for n in ("web", "beat", "worker", "sandbox") if n in children]
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
