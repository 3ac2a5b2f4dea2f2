"""The audit page's short reading of an event's payload, and the amount filter."""

from decimal import Decimal

from django.template import Context, Template

from approvals.models import QuotaRequest
from portal.models import ApiToken
from quotas.audit.labels import SUMMARY_FIELDS, audit_change_summary


def test_changed_fields_only_old_to_new():
    before = {"guarantee": "4", "cap": "6", "version": 1, "namespace": "t-a"}
    after = {"guarantee": "6", "cap": "6", "version": 2, "namespace": "t-a"}
    assert audit_change_summary(before, after) == ["guarantee: 4 → 6", "version: 1 → 2"]


def test_a_new_object_lists_its_values_and_lists_read_short():
    after = {"status": "draft", "lines": [{"cap": "1"}, {"cap": "2"}], "classes": ["a", "b"]}
    assert audit_change_summary(None, after) == ["status: draft", "lines: 2 items", "classes: a, b"]


def test_removed_and_empty_values_and_long_text():
    summary = audit_change_summary(
        {"per_pod_max": "2", "note": "x"}, {"per_pod_max": None, "reason": "y" * 80}
    )
    assert summary[0] == "per_pod_max: 2 → \u2013"
    assert (
        summary[1].startswith("reason: yyy") and summary[1].endswith("…") and len(summary[1]) == 48
    )
    assert summary[2] == "note: x → \u2013"


def test_many_fields_are_cut_with_a_count():
    after = {f"f{i}": i for i in range(SUMMARY_FIELDS + 3)}
    summary = audit_change_summary({}, after)
    assert len(summary) == SUMMARY_FIELDS + 1 and summary[-1] == "and 3 more fields"


def test_no_payload_is_no_summary():
    assert audit_change_summary(None, None) == []
    assert audit_change_summary({"a": 1}, {"a": 1}) == []


def test_amount_filter_reads_as_the_rules_write():
    out = Template("{{ a|amount }} {{ b|amount }} {{ c|amount|default:'\u2013' }}").render(
        Context(
            {
                "a": Decimal("10.000"),
                "b": Decimal("0.50"),
                "c": None,
            }
        )
    )
    assert out == "10 0.5 \u2013"


def test_fields_choices_and_stored_texts_read_in_the_readers_language():
    from django.utils import translation

    from quotas.texts import Text

    policy = Text.of("one platform admin must approve")
    before = {"status": "draft"}
    after = {
        "status": "submitted",
        "policy": policy.english(),
        "policy_text": policy.to_json(),
        "warnings": ["an English warning"],
        "warnings_text": [None],  # stored without a text: shown as it was written
    }
    assert audit_change_summary(before, after, "QuotaRequest") == [
        "status: draft → submitted",
        "approval rule: one platform admin must approve",
        "warnings: an English warning",
    ]
    with translation.override("zh-hans"):
        summary = audit_change_summary(before, after, "QuotaRequest")
        words = [
            translation.gettext("status"),
            str(dict(QuotaRequest.Status.choices)["draft"]),
            str(dict(QuotaRequest.Status.choices)["submitted"]),
            str(policy),
        ]
    assert summary[0] == f"{words[0]}: {words[1]} → {words[2]}"
    assert summary[1].endswith(f": {words[3]}") and "approval" not in summary[1]
    assert summary[2].endswith(": an English warning")
    # A token's fields by the token model's names; an unknown type keeps the payload's keys.
    with translation.override("zh-hans"):
        assert audit_change_summary(None, {"expires_at": "2027"}, "ApiToken") == [
            f"{ApiToken._meta.get_field('expires_at').verbose_name}: 2027"
        ]
    assert audit_change_summary(None, {"expires_at": "2027"}, "Nothing") == ["expires_at: 2027"]
