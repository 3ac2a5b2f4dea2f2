"""Read-only API views of quota data, scoped by the same selectors as the UI."""

from collections import defaultdict

from rest_framework import generics

from portal.api.pagination import ApiPagination
from portal.errors import PermissionDenied
from quotas.api.serializers import (
    AllocationSerializer,
    ClusterSerializer,
    FindingSerializer,
    TeamSerializer,
)
from quotas.kube.status import cluster_backend_problems
from quotas.models import Cluster
from quotas.roles import sees_everything
from quotas.selectors import (
    allocations_visible_to,
    capacity_summary,
    plan_findings,
    teams_visible_to,
)


def _require_overview(user) -> None:
    if not sees_everything(user):
        raise PermissionDenied("only platform admins and auditors see the whole plan")


class _VisibleTeams:
    serializer_class = TeamSerializer

    def get_queryset(self):
        return (
            teams_visible_to(self.request.user)
            .select_related("parent")
            .prefetch_related("namespaces__cluster")
            .order_by("slug")
        )


class TeamList(_VisibleTeams, generics.ListAPIView):
    pagination_class = ApiPagination


class TeamDetail(_VisibleTeams, generics.RetrieveAPIView):
    lookup_field = "slug"


class AllocationList(generics.ListAPIView):
    """?cluster=&team=&namespace=&resource= filter by name; all optional."""

    serializer_class = AllocationSerializer
    pagination_class = ApiPagination
    filters = {
        "cluster": "team_namespace__cluster__name",
        "team": "team_namespace__team__slug",
        "namespace": "team_namespace__name",
        "resource": "resource__name",
    }

    def get_queryset(self):
        allocations = allocations_visible_to(self.request.user)
        for param, lookup in self.filters.items():
            value = self.request.query_params.get(param)
            if value:
                allocations = allocations.filter(**{lookup: value})
        return allocations.order_by(
            "team_namespace__cluster__name", "team_namespace__name", "resource__name"
        )


class ClusterList(generics.ListAPIView):
    """Capacity per resource with the sums of guarantees and caps (admins and auditors)."""

    serializer_class = ClusterSerializer
    pagination_class = ApiPagination

    def get_queryset(self):
        _require_overview(self.request.user)
        return Cluster.objects.order_by("name")

    def get_serializer_context(self):
        context = super().get_serializer_context()
        by_cluster = defaultdict(list)
        for line in capacity_summary():
            by_cluster[line.cluster].append(line)
        context["capacity"] = by_cluster
        context["backend_problems"] = cluster_backend_problems()
        return context


class PlanViolationList(generics.ListAPIView):
    """What the current allocations already break, errors first (admins and auditors)."""

    serializer_class = FindingSerializer
    pagination_class = ApiPagination

    def get_queryset(self):
        _require_overview(self.request.user)
        return plan_findings()
