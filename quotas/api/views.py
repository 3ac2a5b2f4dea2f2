"""Read-only API views of quota data, scoped by the same selectors as the UI and filtered by
the same FilterSets (quotas/filtersets.py)."""

from collections import defaultdict

from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import generics

from common.api.pagination import ApiPagination
from common.api.schema import api_errors
from common.errors import PermissionDenied
from quotas.api.serializers import (
    AllocationSerializer,
    ClusterSerializer,
    FindingSerializer,
    TeamSerializer,
)
from quotas.filtersets import AllocationFilterSet, TeamFilterSet
from quotas.kube.status import cluster_backend_problems
from quotas.models import Allocation, Cluster, Team
from quotas.roles import sees_everything
from quotas.selectors import (
    allocations_visible_to,
    capacity_summary,
    plan_findings,
    teams_visible_to,
)


def _require_overview(user) -> None:
    if not sees_everything(user):
        raise PermissionDenied(_("only platform admins and auditors see the whole plan"))


class OverviewOnly:
    """Views of the whole plan and its history (admins and auditors): anyone else is a 403
    before any filter or id is looked at. Checked here, not in get_queryset, so the schema's
    generator (no user) can read the view's queryset."""

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        _require_overview(request.user)


class _VisibleTeams:
    serializer_class = TeamSerializer
    queryset = Team.objects.none()  # the schema's model; rows come from get_queryset

    def get_queryset(self):
        return (
            teams_visible_to(self.request.user)
            .select_related("parent")
            .prefetch_related("namespaces__cluster")
            .order_by("slug")
        )


@extend_schema_view(get=extend_schema(summary="List the teams you may see", tags=["teams"]))
class TeamList(_VisibleTeams, generics.ListAPIView):
    """Teams you may see (yours, the teams below a department you lead; admins and auditors
    all), with their namespaces."""

    pagination_class = ApiPagination
    filterset_class = TeamFilterSet


@extend_schema_view(get=extend_schema(summary="Read a team", tags=["teams"]))
class TeamDetail(_VisibleTeams, generics.RetrieveAPIView):
    """One team by slug; a team you may not see is a 404, as one that does not exist."""

    lookup_field = "slug"


@extend_schema_view(get=extend_schema(summary="List current allocations", tags=["allocations"]))
class AllocationList(generics.ListAPIView):
    """Current guarantee and cap of every namespace and resource you may see (amounts as
    strings)."""

    serializer_class = AllocationSerializer
    pagination_class = ApiPagination
    filterset_class = AllocationFilterSet
    queryset = Allocation.objects.none()

    def get_queryset(self):
        return allocations_visible_to(self.request.user).order_by(
            "team_namespace__cluster__name", "team_namespace__name", "resource__name"
        )


@extend_schema_view(
    get=extend_schema(
        summary="List clusters with capacity and promises",
        tags=["clusters"],
        responses={200: ClusterSerializer(many=True), **api_errors(403)},
    )
)
class ClusterList(OverviewOnly, generics.ListAPIView):
    """Capacity per resource with the sums of guarantees and caps (admins and auditors)."""

    serializer_class = ClusterSerializer
    pagination_class = ApiPagination
    queryset = Cluster.objects.none()

    def get_queryset(self):
        return Cluster.objects.order_by("name")

    def get_serializer_context(self):
        context = super().get_serializer_context()
        by_cluster = defaultdict(list)
        for line in capacity_summary():
            by_cluster[line.cluster].append(line)
        context["capacity"] = by_cluster
        context["backend_problems"] = cluster_backend_problems()
        return context


@extend_schema_view(
    get=extend_schema(
        summary="List what the current plan breaks",
        tags=["clusters"],
        responses={200: FindingSerializer(many=True), **api_errors(403)},
    )
)
class PlanViolationList(OverviewOnly, generics.ListAPIView):
    """What the current allocations already break, errors first (admins and auditors)."""

    filter_backends = []  # findings are a computed list, not rows to filter

    serializer_class = FindingSerializer
    pagination_class = ApiPagination

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # the schema needs no database
            return []
        return plan_findings()
