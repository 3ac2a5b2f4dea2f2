"""How quota requests look in the API, and what creating and deciding them takes."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from approvals.api.rows import MOMENTS, line_values
from approvals.models import (
    COMMENT_MAX_LENGTH,
    JUSTIFICATION_MAX_LENGTH,
    MAX_LINES,
    MAX_PRIORITY_CLASSES,
    Approval,
    QuotaRequest,
    RequestLine,
)
from approvals.validation import findings_json, localized_findings, requests_fit_problems
from quotas.api.serializers import AmountField, AmountInputField

AMOUNT = {"max_digits": 14, "decimal_places": 3}
# Where the API's request reads put each request's lines and approvals (lists, in order).
LINES_PREFETCHED = "lines_prefetched"
APPROVALS_PREFETCHED = "approvals_prefetched"


class PrefetchedListSerializer(serializers.ListSerializer):
    """A to-many field read from the list its queryset prefetched into ``to_attr`` when the
    instance has one, else from the related manager as usual."""

    def __init__(self, *args, prefetched: str, **kwargs):
        self.prefetched = prefetched
        super().__init__(*args, **kwargs)

    def get_attribute(self, instance):
        found = getattr(instance, self.prefetched, None)
        return found if found is not None else super().get_attribute(instance)


class ApprovalSerializer(serializers.ModelSerializer):
    admin = serializers.CharField(source="admin.username")

    class Meta:
        model = Approval
        fields = ["admin", "created_at", "comment"]


class LineValuesSerializer(serializers.Serializer):
    guarantee = AmountField()
    cap = AmountField()
    per_pod_max = AmountField()
    priority_classes = serializers.ListField(child=serializers.CharField())


class CurrentValuesSerializer(LineValuesSerializer):
    version = serializers.IntegerField(
        allow_null=True, help_text="Allocation version the line was read at (null: none yet)."
    )


class FindingOutSerializer(serializers.Serializer):
    level = serializers.CharField()
    rule = serializers.CharField()
    field = serializers.CharField()
    message = serializers.CharField()
    cluster = serializers.CharField()
    namespace = serializers.CharField()
    resource = serializers.CharField()


class FitsPlanSerializer(serializers.Serializer):
    fits = serializers.BooleanField()
    problems = FindingOutSerializer(many=True)


class RequestLineSerializer(serializers.ModelSerializer):
    namespace = serializers.CharField(source="team_namespace.name")
    cluster = serializers.CharField(source="team_namespace.cluster.name")
    resource = serializers.CharField(source="resource.name")
    current = serializers.SerializerMethodField()
    requested = serializers.SerializerMethodField()
    decided = serializers.SerializerMethodField()

    class Meta:
        model = RequestLine
        fields = [
            "id",
            "namespace",
            "cluster",
            "resource",
            "current",
            "requested",
            "decided",
            "applied_version",
        ]

    @staticmethod
    def _values(line: RequestLine, prefix: str) -> dict:
        return line_values(lambda name: getattr(line, name), prefix)

    @extend_schema_field(CurrentValuesSerializer)
    def get_current(self, line: RequestLine) -> dict:
        return {**self._values(line, "current"), "version": line.current_version}

    @extend_schema_field(LineValuesSerializer)
    def get_requested(self, line: RequestLine) -> dict:
        return self._values(line, "requested")

    @extend_schema_field(LineValuesSerializer(allow_null=True))
    def get_decided(self, line: RequestLine) -> dict | None:
        return None if line.decided_cap is None else self._values(line, "decided")


class RequestSerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.slug")
    requested_by = serializers.CharField(source="requested_by.username")
    decided_by = serializers.CharField(source="decided_by.username", default=None, allow_null=True)
    lines = PrefetchedListSerializer(child=RequestLineSerializer(), prefetched=LINES_PREFETCHED)
    approvals = PrefetchedListSerializer(
        child=ApprovalSerializer(), prefetched=APPROVALS_PREFETCHED
    )
    fits_plan = serializers.SerializerMethodField()
    extends = serializers.IntegerField(
        source="extends_id",
        allow_null=True,
        read_only=True,
        help_text="Kind extension: the running temporary grant whose end it moves.",
    )

    class Meta:
        model = QuotaRequest
        fields = [
            "id",
            "team",
            "status",
            "kind",
            "extends",
            "justification",
            "requested_by",
            *MOMENTS,
            "decided_by",
            "decision_comment",
            "auto_approved",
            "approvals_needed",
            "policy_reason",
            "approvals",
            "findings",
            "fits_plan",
            "lines",
        ]

    def to_representation(self, instance: QuotaRequest) -> dict:
        data = super().to_representation(instance)
        # Stored in English with their msgid: answered in the language asked for.
        data["findings"] = localized_findings(instance.findings or [])
        data["policy_reason"] = instance.localized_policy_reason
        return data

    @extend_schema_field(FitsPlanSerializer(allow_null=True))
    def get_fits_plan(self, request: QuotaRequest) -> dict | None:
        """For a request waiting for an admin: does it still fit the plan, and if not, why.
        (The list answers it for a whole page at once: approvals/api/rows.py.)"""
        if request.status != QuotaRequest.Status.SUBMITTED:
            return None
        found = requests_fit_problems([request])[request.pk]
        return {"fits": not found, "problems": findings_json(found)}


# --- input --------------------------------------------------------------------------------


class LineInputSerializer(serializers.Serializer):
    namespace = serializers.CharField(max_length=63)
    cluster = serializers.CharField(max_length=63)
    resource = serializers.CharField(max_length=253)
    guarantee = AmountInputField(**AMOUNT)
    cap = AmountInputField(**AMOUNT)
    # Left out: unchanged. Removing is explicit: "per_pod_max": null, "priority_classes": [].
    per_pod_max = AmountInputField(**AMOUNT, required=False, allow_null=True)
    priority_classes = serializers.ListField(
        child=serializers.CharField(max_length=253), required=False, max_length=MAX_PRIORITY_CLASSES
    )


class RequestCreateSerializer(serializers.Serializer):
    team = serializers.CharField(max_length=63)
    justification = serializers.CharField(allow_blank=True, max_length=JUSTIFICATION_MAX_LENGTH)
    kind = serializers.ChoiceField(
        choices=QuotaRequest.Kind.choices, default=QuotaRequest.Kind.PERMANENT
    )
    starts_at = serializers.DateTimeField(required=False, allow_null=True, default=None)
    ends_at = serializers.DateTimeField(required=False, allow_null=True, default=None)
    lines = LineInputSerializer(many=True, allow_empty=False, max_length=MAX_LINES)
    submit = serializers.BooleanField(default=False)


class DecisionInputSerializer(serializers.Serializer):
    line = serializers.IntegerField()
    guarantee = AmountInputField(**AMOUNT)
    cap = AmountInputField(**AMOUNT)
    per_pod_max = AmountInputField(**AMOUNT, required=False, allow_null=True)
    priority_classes = serializers.ListField(
        child=serializers.CharField(max_length=253),
        required=False,
        allow_null=True,
        max_length=MAX_PRIORITY_CLASSES,
    )


class ApproveSerializer(serializers.Serializer):
    comment = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=COMMENT_MAX_LENGTH
    )
    decisions = DecisionInputSerializer(
        many=True, required=False, default=list, max_length=MAX_LINES
    )


class CommentSerializer(serializers.Serializer):
    # Blank is let through: the services say which actions need a comment, and why.
    comment = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=COMMENT_MAX_LENGTH
    )


class ExtendSerializer(serializers.Serializer):
    """A later end for a running temporary grant: an extension request, submitted at once."""

    ends_at = serializers.DateTimeField(help_text="The new end (after the grant's current one).")
    justification = serializers.CharField(allow_blank=True, max_length=JUSTIFICATION_MAX_LENGTH)
