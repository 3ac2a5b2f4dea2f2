"""The README's "Using the API" Python snippet, run as written against a live portal: it asks
for quota with a token and polls until the request is applied. A thread plays the Celery worker
(a real sync to the project's Kubernetes API test server, then the requests follow it)."""

import re
import threading
from pathlib import Path

import pytest
from django.db import connections

from approvals.lifecycle import requests_follow_syncs
from portal.tokens import api_token_create
from quotas.kube.sync import cluster_sync
from quotas.models import Cluster

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_snippet() -> str:
    section = README.read_text().split("### Using the API", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.django_db(transaction=True)
def test_the_readme_python_snippet_gets_quota_applied(
    live_server, plan, lead_c, kube_sandbox, monkeypatch, capsys
):
    cluster = plan["team-c"].cluster
    Cluster.objects.filter(pk=cluster.pk).update(sandbox_url=kube_sandbox.url)
    monkeypatch.setenv("PORTAL", live_server.url)
    monkeypatch.setenv("TOKEN", api_token_create(user=lead_c, name="readme")[1])
    done = threading.Event()

    def worker():
        try:
            while not done.wait(0.5):
                cluster_sync(cluster_id=cluster.pk)
                requests_follow_syncs()
        finally:
            connections.close_all()

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        # Running the README snippet as written is the point of the test.
        exec(compile(readme_snippet(), "README.md", "exec"), {"__name__": "readme"})  # noqa: S102
    finally:
        done.set()
        thread.join(30)
    out = capsys.readouterr().out
    assert re.search(r"request #\d+: applied", out), out
