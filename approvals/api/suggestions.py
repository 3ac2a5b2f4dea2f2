"""POST /api/v1/suggestions/<id>/request/: a suggestion becomes a quota request (a draft, or
submitted with ``{"submit": true}``), answered with the request."""

from django.http import Http404
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.api.serializers import RequestSerializer
from approvals.selectors import requests_visible_to
from approvals.suggestions import request_from_suggestion
from common.api.idempotency import IdempotentMixin
from common.api.schema import api_errors
from usage.suggestion_selectors import suggestions_visible_to


class SuggestionRequestSerializer(serializers.Serializer):
    submit = serializers.BooleanField(default=False, help_text="Submit it at once.")


class SuggestionRequest(IdempotentMixin, APIView):
    """Leads of the suggestion's team and platform admins; one open request per suggestion
    (a second is a 409 naming the first)."""

    request_serializers = {"POST": SuggestionRequestSerializer}

    @extend_schema(
        summary="Turn a suggestion into a quota request",
        tags=["suggestions"],
        request=SuggestionRequestSerializer,
        responses={201: RequestSerializer, **api_errors(403, 409)},
        examples=[OpenApiExample("submit at once", request_only=True, value={"submit": True})],
    )
    def post(self, request: Request, pk: int) -> Response:
        body = SuggestionRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        suggestion = suggestions_visible_to(request.user).filter(pk=pk).first()
        if suggestion is None:
            raise Http404(_("no such suggestion"))
        qr = request_from_suggestion(
            suggestion=suggestion, acting_user=request.user, submit=body.validated_data["submit"]
        )
        qr = requests_visible_to(request.user).get(pk=qr.pk)
        return Response(RequestSerializer(qr).data, status=status.HTTP_201_CREATED)
