"""One quota request over the API with safe updates: ``GET requests/<id>/`` with its ``ETag``,
``PATCH`` to revise (a draft or a request sent back for changes; the lines as on create),
``DELETE`` a draft, and the lifecycle moves, answered with the request and its new ``ETag``.

``If-Match`` (optional) is honoured on revise and on the decisions (approve, reject, changes):
a stale tag is a 412 listing what changed (see approvals/api/etags.py).
"""

from django.db import transaction
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from approvals import lifecycle, locks
from approvals.api import views
from approvals.api.etags import request_etag, request_if_match
from approvals.api.serializers import LineInputSerializer, RequestSerializer
from approvals.api.views import RequestDetail, _line_inputs, _visible_request
from approvals.models import JUSTIFICATION_MAX_LENGTH, MAX_LINES
from common.api.idempotency import IdempotentMixin
from common.api.schema import api_errors
from quotas.kube.live_usage import team_usage_now


class RequestReviseSerializer(serializers.Serializer):
    """The new lines replace the old ones (each line as on create; a per-pod max or classes left
    out keep the allocation's); the justification is kept unless given."""

    justification = serializers.CharField(
        required=False, allow_blank=True, max_length=JUSTIFICATION_MAX_LENGTH
    )
    lines = LineInputSerializer(many=True, allow_empty=False, max_length=MAX_LINES)
    submit = serializers.BooleanField(default=False)


REVISE_EXAMPLE = OpenApiExample(
    "ten GPUs instead, sent at once",
    request_only=True,
    value={
        "justification": "Ten A100 for the March training run, as discussed",
        "lines": [
            {
                "cluster": "demo",
                "namespace": "team-a-training",
                "resource": "nvidia.com/gpu",
                "guarantee": "10",
                "cap": "12",
            }
        ],
        "submit": True,
    },
)


def with_etag(response: Response, request_id: int) -> Response:
    response["ETag"] = request_etag(request_id)
    return response


def _serialized(user, pk: int) -> Response:
    return with_etag(Response(RequestSerializer(_visible_request(user, pk)).data), pk)


@extend_schema_view(
    get=extend_schema(summary="Read a quota request (with its ETag)", tags=["requests"]),
    patch=extend_schema(
        summary="Revise a draft or a request sent back for changes",
        description="The lines replace the old ones (each as on create); `submit` sends it at "
        "once. `If-Match` with the request's ETag refuses a stale revision (412).",
        tags=["requests"],
        request=RequestReviseSerializer,
        responses={200: RequestSerializer, **api_errors(403, 409, 412)},
        examples=[REVISE_EXAMPLE],
    ),
    delete=extend_schema(
        summary="Delete a draft (its requester only)",
        tags=["requests"],
        responses={204: None, **api_errors(403, 409)},
    ),
)
class RequestResource(IdempotentMixin, RequestDetail):
    """GET a request (with ETag); PATCH revises it; DELETE a draft (its requester only)."""

    if_match = True
    request_serializers = {"PATCH": RequestReviseSerializer}

    def retrieve(self, request: Request, *args, **kwargs) -> Response:
        qr = self.get_object()
        return with_etag(Response(self.get_serializer(qr).data), qr.pk)

    def patch(self, request: Request, pk: int) -> Response:
        form = RequestReviseSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        qr = self.get_object()
        lines = _line_inputs(request.user, data["lines"])
        # Read the team's usage before any row lock: no cluster call under a lock.
        usage_now = team_usage_now(qr.team) if data["submit"] else None
        with transaction.atomic():
            locks.request_lock(request=qr)
            request_if_match(request_id=qr.pk, header=request.headers.get("If-Match"))
            lifecycle.request_revise(
                request=qr,
                acting_user=request.user,
                lines=lines,
                justification=data.get("justification"),
                submit=data["submit"],
                usage_now=usage_now,
            )
        return _serialized(request.user, qr.pk)


# The lifecycle moves: one view per action (views.ACTION_VIEWS), each idempotent with ETags.
ACTION_VIEWS = views.ACTION_VIEWS
