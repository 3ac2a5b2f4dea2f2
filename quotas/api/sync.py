"""How approved quota reached the clusters (admins and auditors): ``GET sync-runs/?cluster=
&status=&trigger=``, ``GET sync-runs/<id>/`` with the result of every object written, pruned,
drifted or failed, and ``GET drift/?cluster=&restored=`` (objects found changed by others)."""

from django.http import Http404
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import generics, serializers

from common.api.pagination import ApiPagination
from common.api.schema import api_errors
from quotas.api.views import OverviewOnly
from quotas.filtersets import DriftFilterSet, SyncRunFilterSet
from quotas.models import DriftEvent, SyncObjectResult, SyncRun


class SyncRunSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name")

    class Meta:
        model = SyncRun
        fields = [
            "id",
            "cluster",
            "trigger",
            "mode",
            "generation",
            "status",
            "started_at",
            "finished_at",
            "duration_ms",
            "objects_total",
            "counts",
            "error",
            "worker",
            "backend_problems",
        ]


class SyncObjectResultSerializer(serializers.ModelSerializer):
    class Meta:
        model = SyncObjectResult
        fields = ["api_version", "kind", "namespace", "name", "action", "diff", "error"]


class SyncRunDetailSerializer(SyncRunSerializer):
    results = SyncObjectResultSerializer(many=True)

    class Meta(SyncRunSerializer.Meta):
        fields = [*SyncRunSerializer.Meta.fields, "results"]


class DriftSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name")

    class Meta:
        model = DriftEvent
        fields = [
            "id",
            "cluster",
            "run",
            "detected_at",
            "api_version",
            "kind",
            "namespace",
            "name",
            "changes",
            "restored",
        ]


@extend_schema_view(
    get=extend_schema(
        summary="List sync runs, newest first",
        tags=["sync"],
        responses={200: SyncRunSerializer(many=True), **api_errors(403)},
    )
)
class SyncRunList(OverviewOnly, generics.ListAPIView):
    serializer_class = SyncRunSerializer
    pagination_class = ApiPagination
    filterset_class = SyncRunFilterSet
    queryset = SyncRun.objects.none()

    def get_queryset(self):
        return SyncRun.objects.select_related("cluster").order_by("-started_at", "-id")


@extend_schema_view(
    get=extend_schema(
        summary="Read a sync run with the result of every object",
        tags=["sync"],
        responses={200: SyncRunDetailSerializer, **api_errors(403)},
    )
)
class SyncRunDetail(OverviewOnly, generics.RetrieveAPIView):
    serializer_class = SyncRunDetailSerializer
    queryset = SyncRun.objects.none()

    def get_object(self) -> SyncRun:
        run = (
            SyncRun.objects.select_related("cluster")
            .prefetch_related("results")
            .filter(pk=self.kwargs["pk"])
            .first()
        )
        if run is None:
            raise Http404(_("no sync run #%(id)s") % {"id": self.kwargs["pk"]})
        return run


@extend_schema_view(
    get=extend_schema(
        summary="List drift found on cluster objects, newest first",
        tags=["sync"],
        responses={200: DriftSerializer(many=True), **api_errors(403)},
    )
)
class DriftList(OverviewOnly, generics.ListAPIView):
    serializer_class = DriftSerializer
    pagination_class = ApiPagination
    filterset_class = DriftFilterSet
    queryset = DriftEvent.objects.none()

    def get_queryset(self):
        return DriftEvent.objects.select_related("cluster").order_by("-detected_at", "-id")
