"""Starts dex (built by ``make controlplane`` from its Go module) on loopback as the OpenID
Connect provider of the single sign-on tests and of a local try-out: in-memory storage, one
static client, static users with passwords and groups, no approval screen.

    with DexProvider(workdir, client_redirect_uris=[...], users=[DexUser(...)]) as dex:
        dex.issuer, dex.client_id, dex.client_secret

``python -m controlplane.sso_provider`` runs one in the foreground with demo users (password
``password``) and prints the portal settings that sign in with it.
"""

from __future__ import annotations

import argparse
import atexit
import json
import secrets
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

from common.processes import die_with_parent
from controlplane import build
from controlplane.certs import Authority

# bcrypt of "password" (dex's own example configuration).
PASSWORD = "password"  # noqa: S105 (the demo users' password)
PASSWORD_HASH = "$2a$10$2b2cU8CPhOTaGrs1HRQuAueS7JTT5ZHsHSzYiFPm1leZck7Mc8T4W"  # noqa: S105


class ProviderError(RuntimeError):
    pass


@dataclass(frozen=True)
class DexUser:
    email: str
    username: str
    user_id: str
    groups: tuple[str, ...] = ()
    name: str = ""
    email_verified: bool = True

    def as_config(self) -> dict:
        return {
            "email": self.email,
            "username": self.username,
            "preferredUsername": self.username,
            "name": self.name or self.username,
            "emailVerified": self.email_verified,
            "userID": self.user_id,
            "hash": PASSWORD_HASH,
            "groups": list(self.groups),
        }


def dex_binary() -> Path | None:
    """The built dex binary, or None."""
    component = next(c for c in build.COMPONENTS if c.name == "dex")
    folder = build.installed(component, build.go_version())
    return folder / "bin" / "dex" if folder else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class DexProvider:
    workdir: Path
    client_redirect_uris: list[str]
    users: list[DexUser] = field(default_factory=list)
    client_id: str = "gpu-quota-portal"
    client_secret: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    port: int = field(default_factory=_free_port)
    # HTTPS with a certificate of a CA of its own (``ca_file``), for the portal's OIDC_CA_FILE.
    tls: bool = False

    def __post_init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self.workdir = Path(self.workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ca_file: Path | None = None
        if self.tls:
            authority = Authority(self.workdir / "pki")
            self._cert, self._key = authority.serving("dex")
            self.ca_file = authority.ca_file

    @property
    def issuer(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}/dex"

    @property
    def log_file(self) -> Path:
        return self.workdir / "dex.log"

    def _web(self) -> dict:
        address = f"127.0.0.1:{self.port}"
        if not self.tls:
            return {"http": address}
        return {"https": address, "tlsCert": str(self._cert), "tlsKey": str(self._key)}

    def config(self) -> dict:
        return {
            "issuer": self.issuer,
            "storage": {"type": "memory"},
            "web": self._web(),
            "oauth2": {"skipApprovalScreen": True, "responseTypes": ["code"]},
            "enablePasswordDB": True,
            "staticClients": [
                {
                    "id": self.client_id,
                    "secret": self.client_secret,
                    "name": "GPU quota portal",
                    "redirectURIs": list(self.client_redirect_uris),
                }
            ],
            "staticPasswords": [u.as_config() for u in self.users],
            "logger": {"level": "info"},
        }

    def start(self) -> None:
        binary = dex_binary()
        if binary is None:
            raise ProviderError("dex not built: run `make controlplane` (needs Go 1.26)")
        config = self.workdir / "dex.json"
        # dex reads YAML, of which JSON is a part.
        config.write_text(json.dumps(self.config(), indent=2))
        config.chmod(0o600)
        log = open(self.log_file, "ab")  # noqa: SIM115
        self._proc = subprocess.Popen(
            [str(binary), "serve", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,
            cwd=self.workdir,
        )
        log.close()
        atexit.register(self.stop)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 30) -> None:
        url = self.issuer + "/.well-known/openid-configuration"
        context = ssl.create_default_context(cafile=self.ca_file) if self.ca_file else None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                tail = self.log_file.read_text(errors="replace")[-3000:]
                raise ProviderError(f"dex exited with {self._proc.returncode}:\n{tail}")
            try:
                # Loopback only.
                with urllib.request.urlopen(url, timeout=2, context=context) as response:  # noqa: S310
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise ProviderError(f"dex did not answer {url} within {timeout:.0f} s")

    def restart(self, users: list[DexUser] | None = None) -> None:
        """The same issuer, client and port with these users (dex keeps users only in its
        configuration and memory)."""
        self.stop()
        if users is not None:
            self.users = list(users)
        self.start()

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def __enter__(self) -> DexProvider:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


DEMO_USERS = [
    DexUser("admin@example.com", "sso-admin", "demo-admin", ("portal-admins",)),
    DexUser("lead@example.com", "sso-lead", "demo-lead", ("team:team-a:lead",)),
    DexUser("member@example.com", "sso-member", "demo-member", ("team:team-a:member",)),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--portal", default="http://127.0.0.1:8000", help="the portal's address")
    parser.add_argument("--port", type=int, default=5556)
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="dex-"))
    dex = DexProvider(
        workdir,
        client_redirect_uris=[args.portal.rstrip("/") + "/sso/callback/"],
        users=DEMO_USERS,
        port=args.port,
    )
    try:
        dex.start()
    except ProviderError as exc:
        print(f"sso_provider: {exc}", file=sys.stderr)
        return 1
    settings = {
        "OIDC_ISSUER": dex.issuer,
        "OIDC_CLIENT_ID": dex.client_id,
        "OIDC_CLIENT_SECRET": dex.client_secret,
        "OIDC_PROVIDER_NAME": "dex",
        "OIDC_ADMIN_GROUPS": "portal-admins",
        "OIDC_TEAM_LEAD_GROUP": "team:{slug}:lead",
        "OIDC_TEAM_MEMBER_GROUP": "team:{slug}:member",
    }
    # The client secret goes to an owner-only file, not to the terminal.
    env_file = workdir / "portal.env"
    env_file.touch(mode=0o600)
    env_file.write_text("".join(f"{k}='{v}'\n" for k, v in settings.items()))
    print(f"sso_provider: dex is up at {dex.issuer}; start the portal with:", flush=True)
    print(f"  set -a; . {env_file}; set +a; make run", flush=True)
    users = ", ".join(u.email for u in DEMO_USERS)
    print(f"sso_provider: users {users}, password {PASSWORD!r}; Ctrl-C stops", flush=True)
    try:
        while dex._proc is not None and dex._proc.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        dex.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
