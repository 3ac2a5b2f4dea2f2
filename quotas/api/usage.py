"""``GET usage/daily/?cluster=&team=&namespace=&resource=&start=&end=``: the daily rollups of
the team namespaces the user sees (leads and members their teams, admins and auditors all),
per namespace, resource and day; ``start`` and ``end`` (YYYY-MM-DD, inclusive) are required."""

from rest_framework import generics, serializers

from portal.api.pagination import ApiPagination
from portal.errors import ValidationFailed
from quotas.api.filters import cluster_param, day_param, param, period_check
from quotas.api.serializers import AmountField
from quotas.models import UsageDaily
from quotas.selectors import namespaces_visible_to, teams_visible_to

MAX_DAYS = 400


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


class UsageDailyList(generics.ListAPIView):
    serializer_class = UsageDaySerializer
    pagination_class = ApiPagination

    def get_queryset(self):
        user = self.request.user
        params = self.request.query_params
        start = day_param(params, "start", required=True)
        end = day_param(params, "end", required=True)
        period_check(start, end)
        if (end - start).days >= MAX_DAYS:
            raise ValidationFailed(f"end: at most {MAX_DAYS} days from start", field="end")
        namespaces = namespaces_visible_to(user)
        if (cluster := cluster_param(params)) is not None:
            namespaces = namespaces.filter(cluster=cluster)
        if slug := param(params, "team"):
            if not teams_visible_to(user).filter(slug=slug).exists():
                raise ValidationFailed(
                    f"team: no team {slug!r} among the teams you may see", field="team"
                )
            namespaces = namespaces.filter(team__slug=slug)
        if name := param(params, "namespace"):
            namespaces = namespaces.filter(name=name)
        days = UsageDaily.objects.filter(
            team_namespace__in=namespaces.values("pk"), day__gte=start, day__lte=end
        )
        if resource := param(params, "resource"):
            days = days.filter(resource__name=resource)
        return days.select_related(
            "team_namespace__cluster", "team_namespace__team", "resource"
        ).order_by("team_namespace__cluster__name", "team_namespace__name", "resource__name", "day")
