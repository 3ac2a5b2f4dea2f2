"""How approved quota reached the clusters (admins and auditors): ``GET sync-runs/?cluster=
&status=&trigger=``, ``GET sync-runs/<id>/`` with the result of every object written, pruned,
drifted or failed, and ``GET drift/?cluster=&restored=`` (objects found changed by others)."""

from django.http import Http404
from rest_framework import generics, serializers

from portal.api.pagination import ApiPagination
from quotas.api.filters import choice_param, cluster_param
from quotas.api.views import _require_overview
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


class SyncRunList(generics.ListAPIView):
    serializer_class = SyncRunSerializer
    pagination_class = ApiPagination

    def get_queryset(self):
        _require_overview(self.request.user)
        params = self.request.query_params
        runs = SyncRun.objects.select_related("cluster").order_by("-started_at", "-id")
        if (cluster := cluster_param(params)) is not None:
            runs = runs.filter(cluster=cluster)
        if status := choice_param(params, "status", SyncRun.Status.values):
            runs = runs.filter(status=status)
        if trigger := choice_param(params, "trigger", SyncRun.Trigger.values):
            runs = runs.filter(trigger=trigger)
        return runs


class SyncRunDetail(generics.RetrieveAPIView):
    serializer_class = SyncRunDetailSerializer

    def get_object(self) -> SyncRun:
        _require_overview(self.request.user)
        run = (
            SyncRun.objects.select_related("cluster")
            .prefetch_related("results")
            .filter(pk=self.kwargs["pk"])
            .first()
        )
        if run is None:
            raise Http404(f"no sync run #{self.kwargs['pk']}")
        return run


class DriftList(generics.ListAPIView):
    serializer_class = DriftSerializer
    pagination_class = ApiPagination

    def get_queryset(self):
        _require_overview(self.request.user)
        params = self.request.query_params
        drift = DriftEvent.objects.select_related("cluster").order_by("-detected_at", "-id")
        if (cluster := cluster_param(params)) is not None:
            drift = drift.filter(cluster=cluster)
        if restored := choice_param(params, "restored", {"true", "false"}):
            drift = drift.filter(restored=restored == "true")
        return drift
