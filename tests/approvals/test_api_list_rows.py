"""GET /api/v1/requests/ is written from rows (approvals/api/rows.py), the single read by
RequestSerializer: two writers of one answer. Every row of the list must be the request as
read alone, for requests in every state the lifecycle gives (decided values, approvals, two
lines, findings and policy reasons with their texts, temporary grants), in another time zone
and in the other language."""

from datetime import timedelta

import pytest
from django.utils import timezone, translation
from rest_framework.renderers import JSONRenderer

from approvals.lifecycle import (
    request_approve,
    request_changes,
    request_create,
    request_reject,
    request_submit,
)
from approvals.lines import Decision, LineInput
from approvals.models import QuotaRequest
from portal.api.renderers import ApiJSONRenderer
from portal.tokens import api_token_create
from quotas.models import PriorityClass, TeamNamespace

pytestmark = pytest.mark.django_db


@pytest.fixture
def varied(grow, admin, lead_c, cluster, gpu, settings):
    grow(2)
    PriorityClass.objects.create(name="training", value=1000)
    ns = TeamNamespace.objects.filter(team__memberships__user=lead_c).order_by("id")
    first, second = ns[0], ns[1]
    assert first.team_id != second.team_id
    team_ns = TeamNamespace.objects.create(team=first.team, cluster=cluster, name="second-ns")

    def new(lines, **kwargs):
        return request_create(
            team=first.team, acting_user=lead_c, justification="varied", lines=lines, **kwargs
        )

    two_lines = new(
        [
            LineInput(first.pk, gpu.pk, 0, 1, per_pod_max=1, priority_classes=("training",)),
            LineInput(team_ns.pk, gpu.pk, 0, 1),
        ],
        submit=True,
    )
    line = two_lines.lines.order_by("id").first()
    request_approve(
        request=two_lines,
        acting_user=admin,
        comment="less than asked",
        decisions=[Decision(line.pk, 0, 1, per_pod_max=None, priority_classes=())],
    )
    # Three times the cap: a large jump, a warning kept with the request.
    rejected = new([LineInput(first.pk, gpu.pk, 0, 3)], submit=True)
    request_reject(request=rejected, acting_user=admin, comment="not now")
    sent_back = new([LineInput(first.pk, gpu.pk, 0, 2)], submit=True)
    request_changes(request=sent_back, acting_user=admin, comment="say why")
    now = timezone.now()
    grant = new(
        [LineInput(first.pk, gpu.pk, 0, 2)],
        kind=QuotaRequest.Kind.TEMPORARY,
        starts_at=now + timedelta(days=1),
        ends_at=now + timedelta(days=2, hours=3),
    )
    request_submit(request=grant, acting_user=lead_c)
    assert {"approved", "applied", "rejected", "changes_requested", "submitted"} & set(
        QuotaRequest.objects.values_list("status", flat=True)
    )


@pytest.mark.parametrize(
    ("zone", "language"), [("UTC", "en"), ("Asia/Shanghai", "zh-hans"), ("America/Denver", "en")]
)
@pytest.mark.parametrize("who", ["admin", "lead_c"])
def test_each_list_row_is_the_request_read_alone(
    client, request, varied, settings, zone, language, who
):
    settings.TIME_ZONE = zone
    _row, token = api_token_create(user=request.getfixturevalue(who), name="t")
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}", "HTTP_ACCEPT_LANGUAGE": language}
    body = client.get("/api/v1/requests/?page_size=500", **headers).json()
    rows = body["results"]
    assert body["count"] == len(rows) > 5
    kinds = {
        "decided": any(line["decided"] for row in rows for line in row["lines"]),
        "approvals": any(row["approvals"] for row in rows),
        "findings": any(row["findings"] for row in rows),
        "fits_plan": any(row["fits_plan"] for row in rows),
        "two lines": any(len(row["lines"]) > 1 for row in rows),
        "grant": any(row["ends_at"] for row in rows),
        "decided_by": any(row["decided_by"] for row in rows),
        "policy": any(row["policy_reason"] for row in rows),
    }
    assert all(kinds.values()), kinds
    if zone != "UTC":
        assert not any(row["created_at"].endswith("Z") for row in rows)
    for row in rows:
        alone = client.get(f"/api/v1/requests/{row['id']}/", **headers).json()
        assert row == alone


@pytest.mark.parametrize(("zone", "language"), [("UTC", "en"), ("Asia/Shanghai", "zh-hans")])
def test_the_list_is_written_as_drfs_renderer_writes_it(
    client, varied, admin, settings, zone, language
):
    """The list's bytes are those of DRF's JSONRenderer (portal/api/renderers.py writes them
    with orjson), moments, amounts, texts in Chinese and all."""
    settings.TIME_ZONE = zone
    _row, token = api_token_create(user=admin, name="t")
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}", "HTTP_ACCEPT_LANGUAGE": language}
    answer = client.get("/api/v1/requests/?page_size=500", **headers)
    assert answer.status_code == 200
    assert type(answer.accepted_renderer) is ApiJSONRenderer
    with translation.override(language):
        assert answer.content == JSONRenderer().render(answer.data)
    assert len(answer.json()["results"]) > 5
