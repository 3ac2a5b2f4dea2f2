"""The dependency lock: every pin of pyproject.toml is in the locks at the same version, every
locked package has hashes, the production lock holds no development tool; CI's audit verdicts."""

import importlib.util
import json
import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(requirements: list[str]) -> dict[str, str]:
    found = {}
    for requirement in requirements:
        match = re.fullmatch(r"\s*([A-Za-z0-9._-]+)(\[[^\]]*\])?\s*==\s*([^\s;]+)\s*", requirement)
        assert match, f"pyproject.toml: {requirement!r} is not pinned with =="
        found[normalize(match[1])] = match[3]
    return found


def locked(path: Path) -> dict[str, str]:
    text = path.read_text()
    entries = re.findall(r"^([A-Za-z0-9._-]+)==([^\s;\\]+)", text, flags=re.M)
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    for block in blocks:
        if block.strip() and not block.lstrip().startswith("#"):
            assert "--hash=sha256:" in block, f"{path.name}: no hash for {block.split()[0]}"
    return {normalize(name): version for name, version in entries}


def required_by(path: Path) -> dict[str, set[str]]:
    """Each locked package and what the lock says it is there for (its ``# via`` lines)."""
    text = path.read_text()
    out = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2]):
        match = re.match(r"([A-Za-z0-9._-]+)==", block)
        if match:
            via = block.split("# via", 1)[1] if "# via" in block else ""
            out[normalize(match[1])] = {x.strip(" #") for x in via.splitlines() if x.strip(" #")}
    return out


SELF = "gpu-quota-portal (pyproject.toml)"
PRODUCTION = pins(PROJECT["dependencies"])
DEVELOPMENT = pins(PROJECT["optional-dependencies"]["dev"])


@pytest.mark.parametrize(
    ("lock", "wanted"),
    [("requirements.txt", PRODUCTION), ("requirements-dev.txt", {**PRODUCTION, **DEVELOPMENT})],
)
def test_every_pin_of_pyproject_is_locked_at_its_version(lock, wanted):
    have = locked(REPO / lock)
    differ = {
        name: (version, have.get(name, "missing"))
        for name, version in wanted.items()
        if have.get(name) != version
    }
    assert differ == {}, f"{lock} is stale (pyproject, lock): {differ}; run `make lock`"


def test_the_production_lock_holds_no_development_tool():
    """A dev pin is in the production lock only where a production package requires it itself
    (jsonschema and referencing: drf-spectacular's), never for the portal's own sake, and then
    at the version the dev lock tests."""
    have = locked(REPO / "requirements.txt")
    via = required_by(REPO / "requirements.txt")
    shared = set(DEVELOPMENT) & set(have)
    assert {name: sorted(via[name]) for name in shared if not via[name] or SELF in via[name]} == {}
    assert {n: (DEVELOPMENT[n], have[n]) for n in shared if have[n] != DEVELOPMENT[n]} == {}


def test_extras_of_pinned_packages_are_locked():
    # psycopg[binary] brings psycopg-binary: the lock must carry it at the same version.
    assert locked(REPO / "requirements.txt")["psycopg-binary"] == PRODUCTION["psycopg"]


def _audit_module():
    spec = importlib.util.spec_from_file_location("audit", REPO / ".ci" / "audit_dependencies.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def report(*dependencies) -> str:
    return json.dumps({"dependencies": list(dependencies), "fixes": []})


class TestAuditVerdicts:
    audit = _audit_module()

    def test_a_vulnerability_fails(self):
        vulnerable = {
            "name": "django",
            "version": "5.2.0",
            "vulns": [{"id": "PYSEC-2025-1", "fix_versions": ["5.2.1"]}],
        }
        code, message = self.audit.judge("requirements.txt", 1, report(vulnerable), "")
        assert code == 1 and "django 5.2.0: PYSEC-2025-1 (fixed in 5.2.1)" in message

    def test_a_clean_audit_passes(self):
        clean = {"name": "django", "version": "5.2.19", "vulns": []}
        assert self.audit.judge("r.txt", 0, report(clean), "")[0] == 0

    def test_an_unreachable_service_warns_and_passes(self):
        stderr = "requests.exceptions.ConnectionError: ... NameResolutionError(...)"
        code, message = self.audit.judge("r.txt", 1, "", stderr)
        assert code == 0 and "NOT AUDITED" in message

    def test_a_service_without_data_for_any_package_warns_and_passes(self):
        # What pip-audit reports (exit 0) against an index that serves no vulnerability data.
        skipped = {"name": "django", "skip_reason": "Dependency not found on PyPI ..."}
        code, message = self.audit.judge("r.txt", 0, report(skipped), "")
        assert code == 0 and "NOT AUDITED" in message

    def test_any_other_failure_fails(self):
        code, _ = self.audit.judge("r.txt", 1, "", "ERROR: hash mismatch in requirements")
        assert code == 1
