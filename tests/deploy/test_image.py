"""The product image holds the product only: the Kubernetes API test server stays out of it."""

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# What the product runs: the shared kernel, the shell and the apps.
PRODUCT_PACKAGES = ("common", "portal", "quotas", "approvals")


def test_dockerfile_copies_no_development_tool():
    copied = re.findall(r"^COPY\s+(\S+)", (REPO / "Dockerfile").read_text(), flags=re.M)
    assert [p for p in PRODUCT_PACKAGES if p not in copied] == []
    assert not [c for c in copied if c in (".", "./") or c.startswith("kubesandbox")]


def test_installed_packages_leave_the_test_server_out():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    include = project["tool"]["setuptools"]["packages"]["find"]["include"]
    assert not [p for p in include if p.startswith("kubesandbox")]
    assert [p for p in PRODUCT_PACKAGES if f"{p}*" not in include] == []
    # And nothing the product runs imports it.
    offenders = [
        str(path.relative_to(REPO))
        for package in PRODUCT_PACKAGES
        for path in (REPO / package).rglob("*.py")
        if re.search(r"^\s*(from|import)\s+kubesandbox", path.read_text(), flags=re.M)
        and path.name != "run_portal.py"  # the local demo starts it when it is there
    ]
    assert offenders == []
