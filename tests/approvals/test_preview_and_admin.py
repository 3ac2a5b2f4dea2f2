"""Preview of a pending request from a server-side dry run; deciding from the Django admin."""

import pytest

from approvals.lifecycle import request_submit
from approvals.models import QuotaRequest
from approvals.preview import request_preview
from approvals.selectors import requests_visible_to
from quotas.kube.sync import cluster_sync
from quotas.models import Cluster
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db


@pytest.fixture
def submitted(plan, lead_c, gpu, strict_policy, kube_sandbox):
    cluster = plan["team-c"].cluster
    Cluster.objects.filter(pk=cluster.pk).update(sandbox_url=kube_sandbox.url)
    assert cluster_sync(cluster_id=cluster.pk).status == "succeeded"
    request = new_request(lead_c, plan["team-c"], gpu, 3, 6)
    request_submit(request=request, acting_user=lead_c)
    return request


def test_preview_of_a_pending_request_shows_its_change_and_writes_nothing(
    submitted,
    kube_sandbox,
):
    kube_sandbox.stats.reset()
    [(cluster, outcomes)] = request_preview(submitted).items()
    assert cluster == "demo"
    changes = {(o.key[1], o.key[3]): o.diff for o in outcomes}
    assert {"path": "spec.hard.requests.nvidia.com/gpu", "old": "4", "new": "6"} in changes[
        ("ResourceQuota", "gpu-quota")
    ]
    assert {"path": "spec.deserved.nvidia.com/gpu", "old": "2", "new": "3"} in changes[
        ("Queue", "team-c-dev")
    ]
    assert kube_sandbox.stats.writes == 0


def test_admin_preview_page_and_approve_action(client, submitted, admin, kube_sandbox):
    client.force_login(admin)
    page = client.get(f"/admin/approvals/quotarequest/{submitted.pk}/preview/")
    assert page.status_code == 200 and "gpu-quota" in page.content.decode()
    response = client.post(
        "/admin/approvals/quotarequest/",
        {"action": "approve", "_selected_action": [submitted.pk]},
    )
    assert response.status_code == 302
    submitted.refresh_from_db()
    assert submitted.status == QuotaRequest.Status.APPLYING


def test_admin_action_shows_the_rule_instead_of_failing(client, plan, lead_a, gpu, admin):
    request = new_request(lead_a, plan["team-a"], gpu, 6, 8)
    QuotaRequest.objects.filter(pk=request.pk).update(status="applied")
    client.force_login(admin)
    response = client.post(
        "/admin/approvals/quotarequest/",
        {"action": "approve", "_selected_action": [request.pk]},
        follow=True,
    )
    assert "cannot become approved" in response.content.decode()


def test_request_pages_are_for_admins_and_auditors(client, submitted, lead_c, auditor):
    client.force_login(lead_c)
    assert client.get(f"/admin/approvals/quotarequest/{submitted.pk}/preview/").status_code == 302
    client.force_login(auditor)
    assert client.get(f"/admin/approvals/quotarequest/{submitted.pk}/change/").status_code == 200
    client.post(
        "/admin/approvals/quotarequest/",
        {"action": "approve", "_selected_action": [submitted.pk]},
    )
    submitted.refresh_from_db()
    assert submitted.status == QuotaRequest.Status.SUBMITTED  # auditors change nothing


def test_requests_visible_to_people_of_the_team_only(submitted, lead_c, lead_a, admin, auditor):
    assert list(requests_visible_to(lead_c)) == [submitted]
    assert list(requests_visible_to(lead_a)) == []
    assert list(requests_visible_to(admin)) == [submitted]
    assert list(requests_visible_to(auditor)) == [submitted]
