"""Builds the real control plane's binaries from the wrapper Go modules beside this file.

Each component is built into a cache outside the repository, in a folder named by its pinned
version and a digest of its wrapper (go.mod, go.sum, flags, Go version), so a build is reused
until a pin changes. Besides the binaries the cache keeps what the launcher needs from the
downloaded modules (Kueue's and Volcano's CRDs and webhook manifests, kwok's stages), so
running the control plane needs no Go toolchain.

    python -m controlplane.build            # builds what is missing, prints each build's time
    python -m controlplane.build --check    # exit 1 and name what is missing, build nothing
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
KUBERNETES_VERSION = "v1.36.3"


def cache_root() -> Path:
    configured = os.environ.get("PORTAL_CONTROLPLANE_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpu-quota-portal" / "controlplane"


def _version_ldflags(version: str) -> list[str]:
    major, minor = version.lstrip("v").split(".")[:2]
    flags = []
    # kube-apiserver reports component-base's version on /version; client-go's is what the
    # binaries send as their user agent. Without them both read v0.0.0-master.
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
    return flags


@dataclass(frozen=True)
class Component:
    name: str
    module: str
    # output binary name -> package path
    binaries: dict[str, str]
    ldflags: tuple[str, ...] = ()
    # folder in the cache's share/<name> -> folder inside the downloaded module
    assets: dict[str, str] = field(default_factory=dict)

    @property
    def wrapper(self) -> Path:
        return HERE / self.name

    def pinned_version(self) -> str:
        for line in (self.wrapper / "go.mod").read_text().splitlines():
            parts = line.split()
            if parts[:1] == ["require"]:
                parts = parts[1:]
            if len(parts) >= 2 and parts[0] == self.module:
                return parts[1]
        raise RuntimeError(f"{self.wrapper}/go.mod does not require {self.module}")

    def digest(self, go_version: str) -> str:
        h = hashlib.sha256()
        for part in ("go.mod", "go.sum"):
            h.update((self.wrapper / part).read_bytes())
        h.update(json.dumps([self.binaries, self.ldflags, self.assets, go_version]).encode())
        return h.hexdigest()[:12]

    def directory(self, go_version: str) -> Path:
        return cache_root() / f"{self.name}-{self.pinned_version()}-{self.digest(go_version)}"


COMPONENTS = (
    Component(
        name="kubernetes",
        module="k8s.io/kubernetes",
        binaries={
            "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
            "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
            "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
        },
        ldflags=tuple(_version_ldflags(KUBERNETES_VERSION)),
    ),
    Component(
        name="etcd",
        module="go.etcd.io/etcd/server/v3",
        binaries={"etcd": "go.etcd.io/etcd/server/v3"},
    ),
    Component(
        name="kwok",
        module="sigs.k8s.io/kwok",
        binaries={"kwok": "sigs.k8s.io/kwok/cmd/kwok"},
        assets={"stages": "kustomize/stage"},
    ),
    Component(
        name="kueue",
        module="sigs.k8s.io/kueue",
        binaries={"kueue": "sigs.k8s.io/kueue/cmd/kueue"},
        assets={"crd": "config/components/crd/bases", "webhook": "config/components/webhook"},
    ),
    Component(
        name="volcano",
        module="volcano.sh/volcano",
        binaries={
            "vc-scheduler": "volcano.sh/volcano/cmd/scheduler",
            "vc-controller-manager": "volcano.sh/volcano/cmd/controller-manager",
            "vc-webhook-manager": "volcano.sh/volcano/cmd/webhook-manager",
        },
        assets={"crd": "config/crd/volcano/bases"},
    ),
    # The OpenID Connect provider of the single sign-on tests. Its web assets are embedded.
    Component(
        name="dex",
        module="github.com/dexidp/dex",
        binaries={"dex": "github.com/dexidp/dex/cmd/dex"},
    ),
)


def go_version() -> str | None:
    go = shutil.which("go")
    if not go:
        return None
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def installed(component: Component, goversion: str | None = None) -> Path | None:
    """The cache folder of a built component, or None. Without Go the newest build of the
    pinned version counts (the digest needs the toolchain's version)."""
    if goversion:
        d = component.directory(goversion)
        return d if (d / "done").exists() else None
    prefix = f"{component.name}-{component.pinned_version()}-"
    root = cache_root()
    if not root.is_dir():
        return None
    built = [d for d in root.iterdir() if d.name.startswith(prefix) and (d / "done").exists()]
    return max(built, key=lambda d: (d / "done").stat().st_mtime) if built else None


def _module_dir(component: Component, workdir: Path) -> Path:
    out = subprocess.run(
        ["go", "list", "-m", "-json", component.module],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(json.loads(out.stdout)["Dir"])


def build(component: Component, goversion: str) -> float:
    """Builds one component into its cache folder; returns the seconds it took."""
    target = component.directory(goversion)
    started = time.monotonic()
    staging = Path(tempfile.mkdtemp(prefix=f".{component.name}-", dir=cache_root()))
    try:
        env = dict(os.environ)
        subprocess.run(["go", "mod", "download"], cwd=component.wrapper, env=env, check=True)
        bindir = staging / "bin"
        bindir.mkdir()
        ldflags = " ".join(["-s", "-w", *component.ldflags])
        for binary, package in component.binaries.items():
            subprocess.run(
                ["go", "build", "-ldflags", ldflags, "-o", str(bindir / binary), package],
                cwd=component.wrapper,
                env=env,
                check=True,
            )
        if component.assets:
            source = _module_dir(component, component.wrapper)
            for name, rel in component.assets.items():
                shutil.copytree(source / rel, staging / "share" / name)
            # Module cache files are read-only; the cache folder must stay removable.
            for path in (staging / "share").rglob("*"):
                path.chmod(0o755 if path.is_dir() else 0o644)
        (staging / "done").write_text(
            json.dumps({"version": component.pinned_version(), "go": goversion}) + "\n"
        )
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report what is missing")
    parser.add_argument("components", nargs="*", help="build only these (default: all)")
    args = parser.parse_args(argv)
    wanted = [c for c in COMPONENTS if not args.components or c.name in args.components]
    goversion = go_version()
    if goversion is None:
        missing = [c.name for c in wanted if installed(c) is None]
        if missing:
            print(f"controlplane: no Go toolchain; not built: {', '.join(missing)}")
            return 1
        print("controlplane: every component is built (no Go toolchain to check digests)")
        return 0
    cache_root().mkdir(parents=True, exist_ok=True)
    failed = []
    for component in wanted:
        done = installed(component, goversion)
        if done:
            print(f"controlplane: {component.name} {component.pinned_version()} cached in {done}")
            continue
        if args.check:
            failed.append(component.name)
            continue
        print(
            f"controlplane: building {component.name} {component.pinned_version()} ...", flush=True
        )
        try:
            seconds = build(component, goversion)
        except subprocess.CalledProcessError as exc:
            print(f"controlplane: {component.name} failed: {exc}", file=sys.stderr)
            failed.append(component.name)
            continue
        print(f"controlplane: built {component.name} in {seconds:.0f} s", flush=True)
    if failed:
        print(f"controlplane: missing: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
