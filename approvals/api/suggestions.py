"""POST /api/v1/suggestions/<id>/request/: a suggestion becomes a quota request (a draft, or
submitted with ``{"submit": true}``), answered with the request."""

from django.http import Http404
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.api.serializers import RequestSerializer
from approvals.selectors import requests_visible_to
from approvals.suggestions import request_from_suggestion
from portal.api.idempotency import IdempotentMixin
from quotas.usage.suggestion_selectors import suggestions_visible_to


class _Body(serializers.Serializer):
    submit = serializers.BooleanField(default=False)


class SuggestionRequest(IdempotentMixin, APIView):
    def post(self, request: Request, pk: int) -> Response:
        body = _Body(data=request.data)
        body.is_valid(raise_exception=True)
        suggestion = suggestions_visible_to(request.user).filter(pk=pk).first()
        if suggestion is None:
            raise Http404("no such suggestion")
        qr = request_from_suggestion(
            suggestion=suggestion, acting_user=request.user, submit=body.validated_data["submit"]
        )
        qr = requests_visible_to(request.user).get(pk=qr.pk)
        return Response(RequestSerializer(qr).data, status=status.HTTP_201_CREATED)
