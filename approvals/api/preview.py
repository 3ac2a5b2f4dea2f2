"""Previews over the API: ``POST requests/preview/`` (an unsaved request, the body as on create)
and ``POST requests/<id>/preview/`` (a saved one). Both answer what submitting (for a submitted
request: approving) would meet now: the validation findings, the policy decision, stale base
values; for admins and auditors also the dry-run diff of the cluster objects, as the request
page's preview shows. Nothing is written anywhere."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.api.serializers import RequestCreateSerializer, RequestLineSerializer
from approvals.api.views import CREATE_EXAMPLE, _line_inputs, _team, _visible_request
from approvals.preview import RequestCheck, request_check, request_draft_check
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

    def get_fits(self, check: RequestCheck) -> bool:
        return not check.errors and not check.stale

    def get_clusters(self, check: RequestCheck) -> list[dict] | None:
        """None for people who do not see cluster objects (leads, members)."""
        if check.clusters is None:
            return None
        rows = [{"cluster": name, "objects": outcomes} for name, outcomes in check.clusters.items()]
        return ClusterChangesSerializer(rows, many=True).data


def _answer(check: RequestCheck) -> Response:
    return Response(RequestCheckSerializer(check).data)


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
        return _answer(request_check(request=qr, acting_user=request.user))


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
