"""Production defaults: `check --deploy` is clean with the documented production settings,
every response carries the Content-Security-Policy, HSTS follows the environment, and no
template holds inline script or style the CSP would block."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.test import Client

ROOT = Path(__file__).resolve().parents[2]
CONFIGMAP = ROOT / "deploy" / "kubernetes" / "configmap.yaml"


def production_env() -> dict[str, str]:
    """The documented production environment: the Kubernetes ConfigMap plus the Secret's keys."""
    data = yaml.safe_load(CONFIGMAP.read_text())["data"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PORTAL_"))}
    env.update(data)
    env.update(
        DJANGO_SETTINGS_MODULE="portal.settings",
        DJANGO_SECRET_KEY="k8s-secret-" + "Zx9!qR7#vB2$mN5%" * 4,
        AUDIT_MAC_KEY="audit-mac-" + "Qw3#eR5%tY7&uI9*" * 3,
        PORTAL_VAR_DIR=str(ROOT / "var" / "check-deploy"),
    )
    env.pop("DATABASE_URL", None)  # the check needs no database
    return env


def run_manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_the_production_settings():
    result = run_manage("check", "--deploy", "--fail-level", "WARNING", env=production_env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_check_deploy_names_what_the_demo_defaults_lack():
    env = {k: v for k, v in production_env().items() if not k.startswith("DJANGO_SECURE")}
    result = run_manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012"):
        assert warning in result.stdout + result.stderr


def test_production_settings_from_the_environment():
    code = (
        "import django;django.setup();from django.conf import settings as s;"
        "print(s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS, s.SECURE_HSTS_PRELOAD,"
        " s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE,"
        " s.SECURE_PROXY_SSL_HEADER, s.PORTAL_TRUSTED_PROXY_COUNT)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=production_env(), capture_output=True, text=True, cwd=ROOT
    )
    assert out.stdout.strip() == (
        "31536000 True True True True True ('HTTP_X_FORWARDED_PROTO', 'https') 1"
    ), out.stderr


@pytest.mark.django_db
def test_every_response_carries_the_content_security_policy(client, lead_a):
    for url in ("/login/", "/healthz", "/api/v1/teams/"):
        policy = client.get(url)["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "style-src 'self'" in policy, url
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
        assert "frame-ancestors 'none'" in policy and "object-src 'none'" in policy
    client.force_login(lead_a)
    assert "Content-Security-Policy" in client.get("/")


@pytest.mark.django_db
def test_report_only_when_asked(client, settings):
    settings.PORTAL_CSP_REPORT_ONLY = True
    response = client.get("/login/")
    assert "Content-Security-Policy" not in response
    assert response["Content-Security-Policy-Report-Only"] == settings.PORTAL_CSP


@pytest.mark.django_db
def test_hsts_and_the_https_redirect_follow_the_settings(client, settings):
    assert "Strict-Transport-Security" not in client.get("/login/", secure=True)
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    settings.SECURE_HSTS_PRELOAD = True
    settings.SECURE_SSL_REDIRECT = True
    client = Client()  # the security middleware reads its settings when it is built
    response = client.get("/login/", secure=True)
    assert response["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    redirect = client.get("/login/")
    assert redirect.status_code == 301 and redirect["Location"].startswith("https://")
    # The kubelet's probes speak plain HTTP.
    assert client.get("/healthz").status_code == 200


INLINE = [
    (
        re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>", re.I),
        "inline <script>",
    ),
    (re.compile(r"<style\b", re.I), "<style> element"),
    (re.compile(r"\sstyle\s*=", re.I), "style= attribute"),
    (re.compile(r"\son[a-z]+\s*=", re.I), "on...= handler"),
    (re.compile(r"javascript:", re.I), "javascript: URL"),
]


def test_no_template_holds_inline_script_or_style():
    found = []
    for path in sorted((ROOT / "templates").rglob("*.html")):
        text = path.read_text()
        for pattern, what in INLINE:
            for match in pattern.finditer(text):
                found.append(f"{path.relative_to(ROOT)}: {what}: {match.group(0)!r}")
    assert found == []
