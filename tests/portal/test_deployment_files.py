"""docker-compose.yml follows the Compose specification; configuration is documented."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SECRET_KEY_NAMES = re.compile(r"(PASSWORD|SECRET|TOKEN|KEY)$", re.IGNORECASE)


def _check_jsonschema() -> str:
    found = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent))
    assert found, "check-jsonschema is a dev dependency and must be installed"
    return found


def test_compose_file_validates_against_the_compose_specification():
    result = subprocess.run(
        [_check_jsonschema(), "--builtin-schema", "vendor.compose-spec", "docker-compose.yml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_check_catches_an_invalid_file(tmp_path):
    bad = tmp_path / "docker-compose.yml"
    bad.write_text("services:\n  web:\n    image: x\n    restart_policy_typo: always\n")
    result = subprocess.run(
        [_check_jsonschema(), "--builtin-schema", "vendor.compose-spec", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_has_the_services_with_healthchecks():
    services = _compose()["services"]
    for name in ("postgres", "redis", "web", "worker", "beat"):
        assert name in services, name
        check = services[name].get("healthcheck", {})
        assert check.get("test") and not check.get("disable"), f"{name} has no healthcheck"


def test_compose_holds_no_secrets():
    def walk(node, path=""):
        if isinstance(node, dict):
            for key, value in node.items():
                yield from walk(value, f"{path}.{key}")
                if SECRET_KEY_NAMES.search(str(key)) and isinstance(value, str):
                    yield f"{path}.{key}", value
        elif isinstance(node, list):
            for i, item in enumerate(node):
                yield from walk(item, f"{path}[{i}]")

    for where, value in walk(_compose()):
        assert value.startswith("${"), f"{where} holds a literal secret"
    text = (ROOT / "docker-compose.yml").read_text()
    for url in re.findall(r"\w+://[^\s\"']+", text):
        userinfo = url.split("://", 1)[1].split("@", 1)
        if len(userinfo) == 2:
            assert "${" in userinfo[0], f"credentials in {url}"


def test_every_setting_read_from_the_environment_is_documented():
    read = set(
        re.findall(r"env\.\w+\(\s*\"([A-Z0-9_]+)\"", (ROOT / "portal/settings.py").read_text())
    )
    read |= set(
        re.findall(
            r"os\.environ\.get\(\"([A-Z0-9_]+)\"",
            (ROOT / "portal" / "management" / "commands" / "run_portal.py").read_text(),
        )
    )
    documented = set(re.findall(r"^([A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M))
    assert read, "no settings found: the pattern is stale"
    assert read - documented == set(), "settings missing from .env.example"
    readme = (ROOT / "README.md").read_text()
    assert [name for name in sorted(read) if name not in readme] == [], (
        "settings missing from README"
    )
