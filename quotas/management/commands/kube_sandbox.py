"""``manage.py kube_sandbox``: run the Kubernetes API test server in the foreground.

The demo's "sandbox cluster". Runs until SIGINT/SIGTERM, then stops cleanly (the state file, if
any, is written on the way out). Prints one line with the URL; never the token.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from quotas.kube.sandbox import SandboxServer


class Command(BaseCommand):
    help = (
        "Run the sandbox Kubernetes API server (for the demo and manual tests) until interrupted."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--port", type=int, required=True, help="port to listen on (0 = any free port)"
        )
        parser.add_argument(
            "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)"
        )
        parser.add_argument(
            "--state-file", type=Path, help="JSON file that keeps the objects across restarts"
        )
        parser.add_argument(
            "--token-file", type=Path, help="file holding the bearer token clients must send"
        )
        parser.add_argument(
            "--kubeconfig-out", type=Path, help="write a kubeconfig pointing at the server here"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        token = None
        token_file: Path | None = options["token_file"]
        if token_file is not None:
            try:
                token = token_file.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise CommandError(
                    f"cannot read the token file {token_file}: {exc.strerror}"
                ) from exc
            if not token:
                raise CommandError(f"the token file {token_file} is empty")
        server = SandboxServer(
            host=options["host"],
            port=options["port"],
            state_file=options["state_file"],
            token=token,
        )
        try:
            server.start()
        except OSError as exc:
            raise CommandError(
                f"cannot listen on {options['host']}:{options['port']}: {exc.strerror}"
            ) from exc
        done = threading.Event()

        def _stop(signum: int, frame: object) -> None:
            done.set()

        previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            if options["kubeconfig_out"]:
                server.write_kubeconfig(options["kubeconfig_out"])
            auth = "token required" if token else "no auth"
            self.stdout.write(f"kube sandbox listening on {server.url} ({auth})")
            self.stdout.flush()
            while not done.wait(0.5):
                pass
        finally:
            server.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
