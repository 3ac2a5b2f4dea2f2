"""Maximum run times: the longest a pod, Job or Kueue Workload of a priority class may run in
a team namespace.

``GET run-time-limits/?cluster=&team=`` lists those of the namespaces you may see;
``PUT run-time-limits/`` sets one (platform admins); ``DELETE run-time-limits/<id>/`` removes
one (platform admins). Every change is audited and synced to the cluster."""

from django.db.models import QuerySet
from django.http import Http404
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_view
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.api.idempotency import IdempotentMixin
from common.api.pagination import ApiPagination
from common.api.schema import api_errors
from common.errors import PermissionDenied, ValidationFailed
from quotas.filtersets import RunTimeLimitFilterSet
from quotas.models import MAX_RUN_TIME_SECONDS, PriorityClass, RunTimeLimit
from quotas.roles import is_platform_admin
from quotas.selectors import namespaces_visible_to
from quotas.services import run_time_limit_delete, run_time_limit_set


class RunTimeLimitSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="team_namespace.cluster.name")
    namespace = serializers.CharField(source="team_namespace.name")
    team = serializers.CharField(source="team_namespace.team.slug")
    priority_class = serializers.CharField(source="priority_class.name")

    class Meta:
        model = RunTimeLimit
        fields = [
            "id",
            "cluster",
            "namespace",
            "team",
            "priority_class",
            "max_seconds",
            "updated_at",
        ]


class RunTimeLimitSetSerializer(serializers.Serializer):
    cluster = serializers.CharField(max_length=63)
    namespace = serializers.CharField(max_length=63)
    priority_class = serializers.CharField(max_length=253)
    max_seconds = serializers.IntegerField(
        min_value=1,
        max_value=MAX_RUN_TIME_SECONDS,
        help_text="Longest run in seconds (86400: one day).",
    )


SET_EXAMPLE = OpenApiExample(
    "one day for experiments",
    value={
        "cluster": "demo",
        "namespace": "team-c-dev",
        "priority_class": "experiment",
        "max_seconds": 86400,
    },
    request_only=True,
)


def _visible_limits(user) -> QuerySet[RunTimeLimit]:
    return RunTimeLimit.objects.filter(
        team_namespace__in=namespaces_visible_to(user)
    ).select_related("team_namespace__cluster", "team_namespace__team", "priority_class")


def _require_admin(user) -> None:
    if not is_platform_admin(user):
        raise PermissionDenied(_("only platform admins set maximum run times"))


@extend_schema_view(
    get=extend_schema(summary="List maximum run times", tags=["allocations"]),
    put=extend_schema(
        summary="Set a maximum run time",
        description="Creates or changes the maximum run time of one priority class in one team "
        "namespace; pods, Jobs and Kueue Workloads of the class there must then state a "
        "deadline within it. Platform admins only; audited; the cluster is synced.",
        tags=["allocations"],
        request=RunTimeLimitSetSerializer,
        examples=[SET_EXAMPLE],
        responses={200: RunTimeLimitSerializer, 201: RunTimeLimitSerializer, **api_errors(403)},
    ),
)
class RunTimeLimitList(IdempotentMixin, generics.ListAPIView):
    """The maximum run times of the namespaces you may see (admins and auditors: all)."""

    serializer_class = RunTimeLimitSerializer
    pagination_class = ApiPagination
    filterset_class = RunTimeLimitFilterSet
    queryset = RunTimeLimit.objects.none()

    def get_queryset(self):
        return _visible_limits(self.request.user).order_by(
            "team_namespace__cluster__name", "team_namespace__name", "priority_class__name"
        )

    def put(self, request: Request) -> Response:
        _require_admin(request.user)
        form = RunTimeLimitSetSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        namespace = (
            namespaces_visible_to(request.user)
            .filter(cluster__name=data["cluster"], name=data["namespace"])
            .select_related("cluster")
            .first()
        )
        if namespace is None:
            raise ValidationFailed(
                _("namespace: no team namespace %(namespace)s on cluster %(cluster)s")
                % {"namespace": data["namespace"], "cluster": data["cluster"]},
                field="namespace",
            )
        priority_class = PriorityClass.objects.filter(name=data["priority_class"]).first()
        if priority_class is None:
            raise ValidationFailed(
                _("priority_class: no priority class named %(name)s")
                % {"name": data["priority_class"]},
                field="priority_class",
            )
        existed = RunTimeLimit.objects.filter(
            team_namespace=namespace, priority_class=priority_class
        ).exists()
        limit = run_time_limit_set(
            team_namespace=namespace,
            priority_class=priority_class,
            max_seconds=data["max_seconds"],
            acting_user=request.user,
        )
        body = RunTimeLimitSerializer(_visible_limits(request.user).get(pk=limit.pk)).data
        return Response(body, status=status.HTTP_200_OK if existed else status.HTTP_201_CREATED)


@extend_schema_view(
    delete=extend_schema(
        summary="Remove a maximum run time",
        tags=["allocations"],
        responses={204: None, **api_errors(403)},
    )
)
class RunTimeLimitDetail(IdempotentMixin, APIView):
    def delete(self, request: Request, pk: int) -> Response:
        _require_admin(request.user)
        limit = _visible_limits(request.user).filter(pk=pk).first()
        if limit is None:
            raise Http404(_("maximum run time #%(id)s does not exist") % {"id": pk})
        run_time_limit_delete(limit=limit, acting_user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
