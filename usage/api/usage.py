"""``GET usage/daily/?cluster=&team=&namespace=&resource=&start=&end=``: the daily rollups of
the team namespaces the user sees (leads and members their teams, admins and auditors all),
per namespace, resource and day; ``start`` and ``end`` (YYYY-MM-DD, inclusive) are required."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import generics, serializers

from common.api.pagination import ApiPagination
from quotas.api.serializers import AmountField
from quotas.selectors import namespaces_visible_to
from usage.filtersets import UsageDailyFilterSet
from usage.models import UsageDaily


class UsageDaySerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="team_namespace.cluster.name")
    team = serializers.CharField(source="team_namespace.team.slug")
    namespace = serializers.CharField(source="team_namespace.name")
    resource = serializers.CharField(source="resource.name")
    peak = AmountField()
    p95 = AmountField()
    mean = AmountField()
    utilization_mean = AmountField()
    memory_used_mean_mib = AmountField()
    gpu_hours = AmountField()
    borrowed_gpu_hours = AmountField()
    idle_guaranteed_gpu_hours = AmountField()
    guarantee = AmountField()
    pending_peak = AmountField()

    class Meta:
        model = UsageDaily
        fields = [
            "cluster",
            "team",
            "namespace",
            "resource",
            "day",
            "source",
            "samples",
            "peak",
            "p95",
            "mean",
            "utilization_mean",
            "memory_used_mean_mib",
            "gpu_hours",
            "borrowed_gpu_hours",
            "idle_guaranteed_gpu_hours",
            "guarantee",
            "pending_peak",
            "pending_wait_seconds",
            "pending_wait_mean_seconds",
            "evictions",
        ]


@extend_schema_view(
    get=extend_schema(summary="List daily usage per namespace and resource", tags=["usage"])
)
class UsageDailyList(generics.ListAPIView):
    serializer_class = UsageDaySerializer
    pagination_class = ApiPagination
    filterset_class = UsageDailyFilterSet
    queryset = UsageDaily.objects.none()

    def get_queryset(self):
        visible = namespaces_visible_to(self.request.user).values("pk")
        days = UsageDaily.objects.filter(team_namespace__in=visible)
        return days.select_related(
            "team_namespace__cluster", "team_namespace__team", "resource"
        ).order_by("team_namespace__cluster__name", "team_namespace__name", "resource__name", "day")
