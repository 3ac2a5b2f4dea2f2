"""Choice labels come from a table built once per field, still in each reader's language."""

from django.utils import translation

from approvals.models import QuotaRequest


def test_label_in_the_readers_language_and_unknown_values_as_they_are():
    request = QuotaRequest(status=QuotaRequest.Status.SUBMITTED, kind=QuotaRequest.Kind.TEMPORARY)
    with translation.override("en"):
        assert request.get_status_display() == "submitted"
        assert request.get_kind_display() == "temporary"
    with translation.override("zh-hans"):
        assert request.get_status_display() == str(QuotaRequest.Status.SUBMITTED.label)
        assert request.get_status_display() != "submitted"
    with translation.override("en"):
        assert request.get_status_display() == "submitted"  # the table kept the lazy label
    request.status = "no-such-status"
    assert request.get_status_display() == "no-such-status"
