"""Findings and policy reasons are stored in English with their msgid and parameters, and
shown in each reader's language: the API follows Accept-Language, the model renders them in
the active language."""

from decimal import Decimal

import pytest
from django.core import mail
from django.utils import translation

from approvals.models import QuotaRequest
from approvals.notify import send_email_task
from approvals.validation import localized_findings, stored_findings
from quotas.rules import AllocationFacts, ClusterFacts, PlanChange, check_change
from quotas.texts import Text
from tests.support.api import as_user, body

pytestmark = pytest.mark.django_db

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9"}
CLUSTER = ClusterFacts(
    name="demo",
    capacities={"nvidia.com/gpu": Decimal(16)},
    max_cap_share=Decimal("0.5"),
    backends=frozenset({"kueue"}),
)
CURRENT = AllocationFacts("demo", "team-c-dev", "nvidia.com/gpu", Decimal(2), Decimal(4))


def _change(guarantee: int, cap: int) -> list:
    return check_change(
        cluster=CLUSTER,
        allocations=[CURRENT],
        changes=[
            PlanChange(
                "demo",
                "team-c-dev",
                "nvidia.com/gpu",
                Decimal(guarantee),
                Decimal(cap),
                None,
                CURRENT,
            )
        ],
    )


def test_a_finding_made_in_chinese_is_stored_in_english_and_shown_in_either():
    with translation.override("zh-hans"):
        findings = _change(9, 8)
        message = findings[0].message
    assert message.startswith("team-c-dev nvidia.com/gpu 的保障量 9 超过上限 8")
    assert "Kueue：borrowingLimit = 上限 - 保障量，将为 -1" in message  # noqa: RUF001
    stored = stored_findings(findings)
    assert stored[0]["message"] == (
        "guarantee 9 exceeds cap 8 for team-c-dev nvidia.com/gpu (guarantee ≤ cap) "
        "(Kueue: borrowingLimit = cap - guarantee would be -1)"
    )
    assert stored[0]["text"]["msgid"].startswith("guarantee %(guarantee)s exceeds cap")
    with translation.override("zh-hans"):
        assert localized_findings(stored)[0]["message"] == message
    with translation.override("en"):
        shown = localized_findings(stored)[0]
    assert shown["message"] == stored[0]["message"]
    assert "text" not in shown
    assert shown["rule"] == "guarantee_le_cap"


def test_a_finding_stored_before_texts_were_kept_is_shown_as_stored():
    old = [{"level": "warning", "rule": "large_jump", "field": "cap", "message": "cap rises"}]
    with translation.override("zh-hans"):
        assert localized_findings(old) == old


def test_a_text_renders_nested_texts_and_survives_json():
    text = Text.of(
        "%(problem)s (%(where)s)",
        problem=Text.of(
            "%(field)s must be a whole number of %(resource)s, got %(value)s",
            field=Text("cap"),
            resource="nvidia.com/gpu",
            value="1.5",
        ),
        where="ns gpu",
    )
    assert str(text) == "cap must be a whole number of nvidia.com/gpu, got 1.5 (ns gpu)"
    with translation.override("zh-hans"):
        assert str(text) == "上限必须是 nvidia.com/gpu 的整数，实际为 1.5（ns gpu）"  # noqa: RUF001
    assert Text.from_json(text.to_json()) == text


def test_a_text_with_a_context_is_read_with_it_and_keeps_it_in_json():
    # "slice" is a unit here (pgettext "unit"): the catalogue's word for the unit, not any slice.
    text = Text.of("%(amount)s %(unit)s", amount="4", unit=Text("slice", context="unit"))
    with translation.override("zh-hans"):
        unit = translation.pgettext("unit", "slice")
        assert unit != "slice" and str(text) == f"4 {unit}"
    assert str(text) == "4 slice"
    again = Text.from_json(text.to_json())
    assert again == text and dict(again.params)["unit"].context == "unit"


def test_api_refusal_speaks_the_language_asked_for(plan, lead_c, strict_policy):
    client = as_user(lead_c)
    english = client.post("/api/v1/requests/", body(cap="9"), format="json")
    chinese = client.post("/api/v1/requests/", body(cap="9"), format="json", **ZH)
    assert english.status_code == chinese.status_code == 400
    assert english.json()["message"] == (
        "cap 9 exceeds 50% of cluster demo capacity 16 nvidia.com/gpu (max 8)"
    )
    assert chinese.json()["message"] == (
        "上限 9 超过集群 demo 容量 16 nvidia.com/gpu 的 50%（最多 8）"  # noqa: RUF001
    )
    assert chinese.json()["extra"]["errors"][0]["rule"] == "cap_le_share"
    assert chinese.json()["extra"]["field"] == "cap"


def test_a_request_submitted_in_chinese_stores_english_and_shows_each_reader_hers(
    plan, lead_c, strict_policy
):
    client = as_user(lead_c)
    created = client.post("/api/v1/requests/", body(guarantee="5", cap="6"), format="json", **ZH)
    assert created.status_code == 201, created.content
    request = QuotaRequest.objects.get(pk=created.json()["id"])
    # Stored: English, whatever the submitter's language.
    assert request.policy_reason == "one platform admin must approve"
    [jump] = [f for f in request.findings if f["rule"] == "large_jump"]
    assert jump["message"] == "guarantee rises from 2 to 5 (×2.5)"
    # Shown: in the language of whoever reads it.
    assert created.json()["policy_reason"] == "需要一名平台管理员批准"
    chinese = client.get(f"/api/v1/requests/{request.pk}/", **ZH).json()
    english = client.get(f"/api/v1/requests/{request.pk}/").json()
    assert [f["message"] for f in chinese["findings"] if f["rule"] == "large_jump"] == [
        "保障量从 2 提高到 5（×2.5）"  # noqa: RUF001
    ]
    assert [f["message"] for f in english["findings"] if f["rule"] == "large_jump"] == [
        "guarantee rises from 2 to 5 (×2.5)"
    ]
    assert english["policy_reason"] == "one platform admin must approve"
    assert all("text" not in f for f in chinese["findings"])
    with translation.override("zh-hans"):
        assert request.localized_policy_reason == "需要一名平台管理员批准"
        assert "保障量从 2 提高到 5" in request.localized_findings[-1]["message"]


def test_emails_are_written_in_the_default_language(settings):
    payload = {"id": 4, "team": "team-b", "url": "http://portal.example/requests/4/"}
    with translation.override("zh-hans"):  # the language of whoever triggered it: not used
        send_email_task.apply(args=("request.applied", payload, ["x@example.com"]))
    settings.LANGUAGE_CODE = "zh-hans"  # PORTAL_DEFAULT_LANGUAGE=zh-hans
    send_email_task.apply(args=("request.applied", payload, ["x@example.com"]))
    english, chinese = mail.outbox
    assert english.subject == "[GPU quota] request #4 applied to the cluster (team-b)"
    assert chinese.subject == "[GPU 配额] 申请 #4 已应用到集群（team-b）"  # noqa: RUF001
    assert "查看申请：http://portal.example/requests/4/" in chinese.body  # noqa: RUF001
