"""``GET clusters/<name>/``: one cluster's capacity per resource, sums of guarantees and caps,
what is free to guarantee, and the schedulers its API server does not serve (admins and
auditors, as the list and the home page). Never its connection: no kubeconfig path, context,
sandbox address or credentials."""

from django.http import Http404
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import generics

from common.api.schema import api_errors
from quotas.api.serializers import ClusterSerializer
from quotas.api.views import OverviewOnly
from quotas.kube.status import cluster_backend_problems
from quotas.models import Cluster
from quotas.selectors import capacity_summary


@extend_schema_view(
    get=extend_schema(
        summary="Read a cluster's capacity and promises",
        tags=["clusters"],
        responses={200: ClusterSerializer, **api_errors(403)},
    )
)
class ClusterDetail(OverviewOnly, generics.RetrieveAPIView):
    serializer_class = ClusterSerializer
    queryset = Cluster.objects.none()

    def get_object(self) -> Cluster:
        cluster = Cluster.objects.filter(name=self.kwargs["name"]).first()
        if cluster is None:
            raise Http404(_("no cluster named %(name)s") % {"name": repr(self.kwargs["name"])})
        return cluster

    def get_serializer_context(self):
        context = super().get_serializer_context()
        cluster = self.get_object()
        context["capacity"] = {cluster.name: capacity_summary(cluster_ids=[cluster.pk])}
        context["backend_problems"] = cluster_backend_problems(cluster_ids=[cluster.pk])
        return context
