"""``python -m kubesandbox``: run the Kubernetes API test server in the foreground.

The demo's "sandbox cluster". Runs until SIGINT/SIGTERM, then stops cleanly (the state file, if
any, is written on the way out). Prints one line with the URL; never the token.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from kubesandbox.server import SandboxServer


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m kubesandbox",
        description="Run the Kubernetes API test server (demo and manual tests) until interrupted.",
    )
    parser.add_argument(
        "--port", type=int, required=True, help="port to listen on (0 = any free port)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--state-file", type=Path, help="JSON file that keeps the objects across restarts"
    )
    parser.add_argument(
        "--token-file", type=Path, help="file holding the bearer token clients must send"
    )
    parser.add_argument(
        "--kubeconfig-out", type=Path, help="write a kubeconfig pointing at the server here"
    )
    parser.add_argument(
        "--tls-dir",
        type=Path,
        help="serve HTTPS with a self-signed CA and server certificate made (or reused) in this "
        "directory (ca.crt is what clients trust); kubectl sends tokens only over TLS",
    )
    parser.add_argument(
        "--allow-faults",
        action="store_true",
        help="accept fault injection over HTTP (/sandbox/faults); off by default",
    )
    parser.add_argument(
        "--omit-api-version",
        action="append",
        default=[],
        metavar="GROUP/VERSION",
        help="serve without this group-version, like a cluster without that CRD (repeatable), "
        "e.g. kueue.x-k8s.io/v1beta2",
    )
    parser.add_argument(
        "--namespace-finalize-seconds",
        type=float,
        default=0.0,
        help="how long a deleted namespace stays Terminating (default 0)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    options = _arguments(argv)
    token = None
    if options.token_file is not None:
        try:
            token = options.token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            sys.stderr.write(f"cannot read the token file {options.token_file}: {exc.strerror}\n")
            return 2
        if not token:
            sys.stderr.write(f"the token file {options.token_file} is empty\n")
            return 2
    try:
        server = SandboxServer(
            host=options.host,
            port=options.port,
            state_file=options.state_file,
            token=token,
            omit_api_versions=options.omit_api_version,
            namespace_finalize_seconds=options.namespace_finalize_seconds,
            allow_faults=options.allow_faults,
            tls_dir=options.tls_dir,
        )
    except ValueError as exc:
        sys.stderr.write(f"{exc}\n")
        return 2
    try:
        server.start()
    except ImportError as exc:
        sys.stderr.write(f"--tls-dir needs the cryptography package: {exc}\n")
        return 2
    except OSError as exc:
        if options.tls_dir is not None and exc.filename is not None:
            sys.stderr.write(f"cannot use the TLS directory {options.tls_dir}: {exc}\n")
            return 2
        sys.stderr.write(f"cannot listen on {options.host}:{options.port}: {exc.strerror}\n")
        return 1
    done = threading.Event()

    def _stop(signum: int, frame: object) -> None:
        done.set()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        if options.kubeconfig_out:
            server.write_kubeconfig(options.kubeconfig_out)
        auth = "token required" if token else "no auth"
        faults = "faults allowed" if options.allow_faults else "faults off"
        trust = f", CA {server.ca_file}" if server.ca_file else ""
        print(f"kube sandbox listening on {server.url} ({auth}, {faults}{trust})", flush=True)
        while not done.wait(0.5):
            pass
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
