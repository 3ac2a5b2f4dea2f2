"""Choice labels, of a model instance (Django's get_FOO_display) or of rows (choice_labels),
are in each reader's language; an unknown value is shown as it is."""

from django.utils import translation

from approvals.models import QuotaRequest
from common.choices import choice_labels


def test_label_in_the_readers_language_and_unknown_values_as_they_are():
    request = QuotaRequest(status=QuotaRequest.Status.SUBMITTED, kind=QuotaRequest.Kind.TEMPORARY)
    with translation.override("en"):
        assert request.get_status_display() == "submitted"
        assert request.get_kind_display() == "temporary"
    with translation.override("zh-hans"):
        assert request.get_status_display() == str(QuotaRequest.Status.SUBMITTED.label)
        assert request.get_status_display() != "submitted"
    with translation.override("en"):
        assert request.get_status_display() == "submitted"
    request.status = "no-such-status"
    assert request.get_status_display() == "no-such-status"


def test_row_labels_follow_the_active_language():
    with translation.override("en"):
        english = choice_labels(QuotaRequest, "status")
    with translation.override("zh-hans"):
        chinese = choice_labels(QuotaRequest, "status")
        submitted = str(QuotaRequest.Status.SUBMITTED.label)
    assert english[QuotaRequest.Status.SUBMITTED] == "submitted"
    assert chinese[QuotaRequest.Status.SUBMITTED] == submitted != "submitted"
    assert set(english) == set(QuotaRequest.Status.values)
