"""The discussion on a request over the API: ``GET requests/<id>/comments/`` in time order,
``POST`` one comment (leads of the team and platform admins; idempotent with
``Idempotency-Key``). A request the caller cannot see is a 404, its discussion too."""

from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_view
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from approvals.api.views import _visible_request
from approvals.discussion import request_comment_add, request_comments
from approvals.models import RequestComment
from common.api.idempotency import IdempotentMixin
from common.api.pagination import ApiPagination
from common.api.schema import api_errors


class CommentOutSerializer(serializers.ModelSerializer):
    author = serializers.CharField(source="author.username")

    class Meta:
        model = RequestComment
        fields = ["id", "author", "created_at", "text"]


class CommentInSerializer(serializers.Serializer):
    # Blank and overlong text are let through to the service, which says what is wrong with
    # it in the words the page shows too; the bound keeps a huge body from being read further.
    text = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=100_000)


COMMENT_EXAMPLE = OpenApiExample(
    "a question before the decision",
    request_only=True,
    value={"text": "Would 6 GPUs until the end of the month do?"},
)


@extend_schema_view(
    get=extend_schema(summary="The discussion on a request, oldest first", tags=["requests"]),
    post=extend_schema(
        summary="Comment on a request (leads of its team and platform admins)",
        description="In any status, before the decision and after it. Audited "
        "(`request.comment`), and the other side is told (a lead's comment goes to the "
        "admins, an admin's to the team). Empty, overlong (more than 2000 characters) and "
        "control or text-direction characters are a 400 naming `text`.",
        tags=["requests"],
        request=CommentInSerializer,
        responses={201: CommentOutSerializer, **api_errors(403)},
        examples=[COMMENT_EXAMPLE],
    ),
)
class RequestComments(IdempotentMixin, generics.ListCreateAPIView):
    serializer_class = CommentOutSerializer
    pagination_class = ApiPagination
    queryset = RequestComment.objects.none()
    request_serializers = {"POST": CommentInSerializer}

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # the schema generator asks
            return RequestComment.objects.none()
        return request_comments(_visible_request(self.request.user, self.kwargs["pk"]))

    def create(self, request: Request, *args, **kwargs) -> Response:
        form = CommentInSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        qr = _visible_request(request.user, kwargs["pk"])
        comment = request_comment_add(
            request=qr, acting_user=request.user, text=form.validated_data["text"]
        )
        return Response(CommentOutSerializer(comment).data, status=status.HTTP_201_CREATED)
