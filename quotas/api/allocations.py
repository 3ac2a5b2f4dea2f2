"""Team namespaces and allocations with their history, scoped by the same selectors as the
pages: ``GET namespaces/?cluster=&team=``, ``GET allocations/<id>/`` and
``GET allocations/<id>/versions/`` (every kept version, newest first)."""

from django.db.models import Prefetch
from django.http import Http404
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import generics, serializers

from common.api.pagination import ApiPagination
from quotas.api.serializers import AllocationSerializer, AmountField
from quotas.filtersets import NamespaceFilterSet
from quotas.models import Allocation, AllocationVersion, RunTimeLimit, TeamNamespace
from quotas.selectors import allocations_visible_to, namespaces_visible_to


class NamespaceRunTimeSerializer(serializers.Serializer):
    priority_class = serializers.CharField(source="priority_class.name")
    max_seconds = serializers.IntegerField()


class NamespaceSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name")
    team = serializers.CharField(source="team.slug")
    max_run_times = NamespaceRunTimeSerializer(
        source="run_time_limits",
        many=True,
        read_only=True,
        help_text="The longest a pod, Job or Kueue Workload of each priority class may run.",
    )

    class Meta:
        model = TeamNamespace
        fields = [
            "id",
            "name",
            "cluster",
            "team",
            "workload_class",
            "shadow",
            "created_at",
            "max_run_times",
        ]


class AllocationVersionSerializer(serializers.ModelSerializer):
    guarantee = AmountField()
    cap = AmountField()
    per_pod_max = AmountField()
    changed_by = serializers.CharField(
        source="changed_by.username", default=None, allow_null=True, help_text="User name."
    )

    class Meta:
        model = AllocationVersion
        fields = [
            "version",
            "guarantee",
            "cap",
            "per_pod_max",
            "priority_classes",
            "changed_at",
            "changed_by",
            "reason",
            "source",
        ]


@extend_schema_view(get=extend_schema(summary="List team namespaces", tags=["teams"]))
class NamespaceList(generics.ListAPIView):
    """The namespaces of the teams you may see (admins and auditors: all)."""

    serializer_class = NamespaceSerializer
    pagination_class = ApiPagination
    filterset_class = NamespaceFilterSet
    queryset = TeamNamespace.objects.none()

    def get_queryset(self):
        return (
            namespaces_visible_to(self.request.user)
            .select_related("cluster", "team")
            .prefetch_related(
                Prefetch(
                    "run_time_limits",
                    RunTimeLimit.objects.select_related("priority_class").order_by(
                        "priority_class__name"
                    ),
                )
            )
            .order_by("cluster__name", "name")
        )


def _visible_allocation(user, pk: int) -> Allocation:
    allocation = allocations_visible_to(user).filter(pk=pk).first()
    if allocation is None:
        raise Http404(_("allocation #%(id)s does not exist or is not visible to you") % {"id": pk})
    return allocation


@extend_schema_view(get=extend_schema(summary="Read an allocation", tags=["allocations"]))
class AllocationDetail(generics.RetrieveAPIView):
    serializer_class = AllocationSerializer
    queryset = Allocation.objects.none()

    def get_object(self) -> Allocation:
        return _visible_allocation(self.request.user, self.kwargs["pk"])


@extend_schema_view(
    get=extend_schema(summary="List an allocation's versions, newest first", tags=["allocations"])
)
class AllocationVersionList(generics.ListAPIView):
    serializer_class = AllocationVersionSerializer
    pagination_class = ApiPagination
    queryset = AllocationVersion.objects.none()

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # the schema has no allocation id
            return self.queryset
        allocation = _visible_allocation(self.request.user, self.kwargs["pk"])
        return allocation.versions.select_related("changed_by").order_by("-version")
