"""Team namespaces and allocations with their history, scoped by the same selectors as the
pages: ``GET namespaces/?cluster=&team=``, ``GET allocations/<id>/`` and
``GET allocations/<id>/versions/`` (every kept version, newest first)."""

from django.http import Http404
from rest_framework import generics, serializers

from portal.api.pagination import ApiPagination
from portal.errors import ValidationFailed
from quotas.api.filters import cluster_param, param
from quotas.api.serializers import AllocationSerializer, AmountField
from quotas.models import Allocation, AllocationVersion, TeamNamespace
from quotas.selectors import allocations_visible_to, namespaces_visible_to, teams_visible_to


class NamespaceSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name")
    team = serializers.CharField(source="team.slug")

    class Meta:
        model = TeamNamespace
        fields = ["id", "name", "cluster", "team", "workload_class", "shadow", "created_at"]


class AllocationVersionSerializer(serializers.ModelSerializer):
    guarantee = AmountField()
    cap = AmountField()
    per_pod_max = AmountField()
    changed_by = serializers.CharField(source="changed_by.username", default=None)

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


class NamespaceList(generics.ListAPIView):
    """?cluster=&team= (names); an unknown cluster or team is a 400 naming the parameter."""

    serializer_class = NamespaceSerializer
    pagination_class = ApiPagination

    def get_queryset(self):
        params = self.request.query_params
        namespaces = namespaces_visible_to(self.request.user)
        if (cluster := cluster_param(params)) is not None:
            namespaces = namespaces.filter(cluster=cluster)
        if slug := param(params, "team"):
            if not teams_visible_to(self.request.user).filter(slug=slug).exists():
                raise ValidationFailed(
                    f"team: no team {slug!r} among the teams you may see", field="team"
                )
            namespaces = namespaces.filter(team__slug=slug)
        return namespaces.order_by("cluster__name", "name")


def _visible_allocation(user, pk: int) -> Allocation:
    allocation = allocations_visible_to(user).filter(pk=pk).first()
    if allocation is None:
        raise Http404(f"allocation #{pk} does not exist or is not visible to you")
    return allocation


class AllocationDetail(generics.RetrieveAPIView):
    serializer_class = AllocationSerializer

    def get_object(self) -> Allocation:
        return _visible_allocation(self.request.user, self.kwargs["pk"])


class AllocationVersionList(generics.ListAPIView):
    serializer_class = AllocationVersionSerializer
    pagination_class = ApiPagination

    def get_queryset(self):
        allocation = _visible_allocation(self.request.user, self.kwargs["pk"])
        return allocation.versions.select_related("changed_by").order_by("-version")
