"""``GET clusters/<name>/``: one cluster's capacity per resource, sums of guarantees and caps,
what is free to guarantee, and the schedulers its API server does not serve (admins and
auditors, as the list and the home page). Never its connection: no kubeconfig path, context,
sandbox address or credentials."""

from django.http import Http404
from rest_framework import generics

from quotas.api.serializers import ClusterSerializer
from quotas.api.views import _require_overview
from quotas.kube.status import cluster_backend_problems
from quotas.models import Cluster
from quotas.selectors import capacity_summary


class ClusterDetail(generics.RetrieveAPIView):
    serializer_class = ClusterSerializer

    def get_object(self) -> Cluster:
        _require_overview(self.request.user)
        cluster = Cluster.objects.filter(name=self.kwargs["name"]).first()
        if cluster is None:
            raise Http404(f"no cluster named {self.kwargs['name']!r}")
        return cluster

    def get_serializer_context(self):
        context = super().get_serializer_context()
        cluster = self.get_object()
        context["capacity"] = {cluster.name: capacity_summary(cluster_ids=[cluster.pk])}
        context["backend_problems"] = cluster_backend_problems(cluster_ids=[cluster.pk])
        return context
