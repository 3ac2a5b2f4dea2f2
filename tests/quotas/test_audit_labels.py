from django.template import Context, Template
from django.utils import translation

from approvals.models import QuotaRequest
from quotas.audit.labels import ACTION_LABELS, action_label


def test_every_request_status_has_a_label():
    # Transitions record "request.<status>"; a status without a label would show as its code.
    missing = [s for s in QuotaRequest.Status.values if f"request.{s}" not in ACTION_LABELS]
    assert missing == []


def test_known_action_reads_as_its_label():
    with translation.override("en"):
        assert action_label("request.failed") == "Apply failed (retrying)"


def test_unknown_action_reads_as_words():
    assert action_label("team.renamed_twice") == "Team renamed twice"


def test_template_filter():
    out = Template("{% load audit %}{{ a|action_label }}").render(
        Context({"a": "request.submitted"})
    )
    assert out == "Submitted"
