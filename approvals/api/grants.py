"""Extending a running temporary grant over the API: ``POST requests/<id>/extend/`` makes an
extension request (kind ``extension``, submitted at once) that the admins decide like any
other; approved, the grant's end moves (approvals.grants.grant_extension_request)."""

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.api.etags import request_etag
from approvals.api.serializers import ExtendSerializer, RequestSerializer
from approvals.api.views import _visible_request
from approvals.grants import grant_extension_request
from common.api.idempotency import IdempotentMixin
from common.api.schema import api_errors

EXTEND_EXAMPLE = OpenApiExample(
    "a week more for the evaluation runs",
    request_only=True,
    value={"ends_at": "2026-12-20T18:00:00Z", "justification": "the evaluation runs late"},
)


class RequestExtend(IdempotentMixin, APIView):
    request_serializers = {"POST": ExtendSerializer}

    @extend_schema(
        summary="Ask to extend a running temporary grant (leads of its team, platform admins)",
        description="Answers the new extension request (201), waiting for the admins its "
        "grant's change needs; approved, the grant's `ends_at` becomes the new end and its "
        "expiry follows it. A grant that is not running (scheduled, ended, revoked) is a 409, "
        "an end not after the current one a 400 naming `ends_at`.",
        tags=["requests"],
        request=ExtendSerializer,
        responses={201: RequestSerializer, **api_errors(403, 409)},
        examples=[EXTEND_EXAMPLE],
    )
    def post(self, request: Request, pk: int) -> Response:
        form = ExtendSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        grant = _visible_request(request.user, pk)
        extension = grant_extension_request(
            grant=grant,
            acting_user=request.user,
            ends_at=form.validated_data["ends_at"],
            justification=form.validated_data["justification"],
        )
        response = Response(
            RequestSerializer(_visible_request(request.user, extension.pk)).data,
            status=status.HTTP_201_CREATED,
        )
        response["ETag"] = request_etag(extension.pk)
        return response
