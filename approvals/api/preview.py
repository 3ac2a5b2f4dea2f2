"""Previews over the API: ``POST requests/preview/`` (an unsaved request, the body as on create)
and ``POST requests/<id>/preview/`` (a saved one). Both answer what submitting (for a submitted
request: approving) would meet now: the validation findings, the policy decision, stale base
values; for admins and auditors also the dry-run diff of the cluster objects, as the request
page's preview shows. Nothing is written anywhere."""

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.api.serializers import RequestCreateSerializer, RequestLineSerializer
from approvals.api.views import CREATE_EXAMPLE, _line_inputs, _team, _visible_request
from approvals.preview import RequestCheck, request_check, request_draft_check
from approvals.whatif import lines_what_if
from common.api.idempotency import IdempotentMixin
from quotas.api.serializers import FindingSerializer


class PreviewLineSerializer(RequestLineSerializer):
    """A line as it would be: no id (an unsaved request's lines have none)."""

    class Meta(RequestLineSerializer.Meta):
        fields = ["namespace", "cluster", "resource", "current", "requested", "decided"]


class PolicySerializer(serializers.Serializer):
    auto_approve = serializers.BooleanField()
    approvals_needed = serializers.IntegerField()
    reason = serializers.CharField()


class StaleFieldSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    cluster = serializers.CharField()
    namespace = serializers.CharField()
    resource = serializers.CharField()
    field = serializers.CharField()
    base = serializers.JSONField()
    current = serializers.JSONField()
    base_version = serializers.IntegerField(allow_null=True)
    current_version = serializers.IntegerField(allow_null=True)


class ObjectChangeSerializer(serializers.Serializer):
    """One cluster object a sync would write (a dry run checked by the API server)."""

    api_version = serializers.SerializerMethodField()
    kind = serializers.SerializerMethodField()
    namespace = serializers.SerializerMethodField()
    name = serializers.SerializerMethodField()
    action = serializers.CharField()
    diff = serializers.JSONField()
    error = serializers.CharField()

    def get_api_version(self, outcome) -> str:
        return outcome.key[0]

    def get_kind(self, outcome) -> str:
        return outcome.key[1]

    def get_namespace(self, outcome) -> str:
        return outcome.key[2]

    def get_name(self, outcome) -> str:
        return outcome.key[3]


class ClusterChangesSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    objects = ObjectChangeSerializer(many=True)


def _unit_hours(**kwargs) -> serializers.DecimalField:
    return serializers.DecimalField(max_digits=18, decimal_places=3, **kwargs)


class ReplaySerializer(serializers.Serializer):
    """A month replayed under one pair of values, in unit-hours (usage/whatif.py)."""

    demand = _unit_hours(help_text="What ran plus what waited.")
    covered = _unit_hours(help_text="Demand within the guarantee.")
    borrowed = _unit_hours(help_text="What ran above the guarantee (may be taken back).")
    blocked = _unit_hours(help_text="Demand above the cap.")
    idle = _unit_hours(help_text="Guarantee nothing ran on.")
    guaranteed = _unit_hours(help_text="The guarantee times the time.")


class WhatIfSerializer(serializers.Serializer):
    """A line's last 30 whole days replayed from the stored usage samples: under the values in
    force then (as_it_was) and under the line's values (proposed); both null without samples."""

    namespace = serializers.CharField(source="line.team_namespace.name")
    cluster = serializers.CharField(source="line.team_namespace.cluster.name")
    resource = serializers.CharField(source="line.resource.name")
    guarantee = serializers.DecimalField(max_digits=12, decimal_places=3)
    cap = serializers.DecimalField(max_digits=12, decimal_places=3)
    start = serializers.DateField(source="what_if.start", allow_null=True, default=None)
    end = serializers.DateField(source="what_if.end", allow_null=True, default=None)
    samples = serializers.IntegerField(source="what_if.samples", default=0)
    as_it_was = ReplaySerializer(source="what_if.was", allow_null=True, default=None)
    proposed = ReplaySerializer(source="what_if.proposed", allow_null=True, default=None)


class RequestCheckSerializer(serializers.Serializer):
    judged_as = serializers.ChoiceField(choices=["submit", "approve"])
    fits = serializers.SerializerMethodField()
    errors = FindingSerializer(many=True)
    warnings = FindingSerializer(many=True)
    policy = PolicySerializer()
    stale = StaleFieldSerializer(many=True)
    lines = PreviewLineSerializer(many=True)
    clusters = serializers.SerializerMethodField()
    cluster_error = serializers.CharField()
    what_if = serializers.SerializerMethodField()

    def get_fits(self, check: RequestCheck) -> bool:
        return not check.errors and not check.stale

    def get_clusters(self, check: RequestCheck) -> list[dict] | None:
        """None for people who do not see cluster objects (leads, members)."""
        if check.clusters is None:
            return None
        rows = [{"cluster": name, "objects": outcomes} for name, outcomes in check.clusters.items()]
        return ClusterChangesSerializer(rows, many=True).data

    @extend_schema_field(WhatIfSerializer(many=True))
    def get_what_if(self, check: RequestCheck) -> list[dict]:
        """Each line's last month under its values (none for an extension)."""
        extension = self.context.get("extension", False)
        return WhatIfSerializer(lines_what_if(check.lines, extension=extension), many=True).data


def _answer(check: RequestCheck, *, extension: bool = False) -> Response:
    return Response(RequestCheckSerializer(check, context={"extension": extension}).data)


class RequestPreview(IdempotentMixin, APIView):
    """POST requests/<id>/preview/ (no body): a saved request, for whoever may see it."""

    @extend_schema(
        summary="Preview a saved request: what submitting or approving it would meet now",
        tags=["requests"],
        # Its own name: drf-spectacular derives requests_preview_create for both previews.
        operation_id="requests_preview_saved",
        request=None,
        responses={200: RequestCheckSerializer},
    )
    def post(self, request: Request, pk: int) -> Response:
        qr = _visible_request(request.user, pk)
        check = request_check(request=qr, acting_user=request.user)
        return _answer(check, extension=qr.is_extension)


class DraftPreview(IdempotentMixin, APIView):
    """POST requests/preview/: the body of a create (``submit`` is ignored); refused as the
    create would refuse it."""

    @extend_schema(
        summary="Preview an unsaved request (the body of a create): what submitting would meet",
        tags=["requests"],
        operation_id="requests_preview_draft",
        request=RequestCreateSerializer,
        responses={200: RequestCheckSerializer},
        examples=[CREATE_EXAMPLE],
    )
    def post(self, request: Request) -> Response:
        form = RequestCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        user = request.user
        check = request_draft_check(
            team=_team(user, data["team"]),
            acting_user=user,
            justification=data["justification"],
            lines=_line_inputs(user, data["lines"]),
            kind=data["kind"],
            starts_at=data["starts_at"],
            ends_at=data["ends_at"],
        )
        return _answer(check)
