"""The audit page's short reading of an event's payload, and the amount filter."""

from decimal import Decimal

from django.template import Context, Template

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
