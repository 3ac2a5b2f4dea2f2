"""``GET namespaces/<id>/waiting/``: what waits in a team namespace now and why, read from its
cluster at the request (quotas.kube.waiting): the namespace's team, platform admins and
auditors may ask; anyone else gets 404, as for a namespace that does not exist."""

from django.http import Http404
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.api.schema import api_errors
from quotas.kube import waiting
from quotas.kube.live_waits import explanation, waits_of_namespaces
from quotas.selectors import namespaces_visible_to


class HolderSerializer(serializers.Serializer):
    pod = serializers.CharField(help_text="A running pod of the namespace.")
    amount = serializers.CharField(help_text="What it holds of the resource.")


class WaitSerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="Pod, Job, ReplicaSet, Workload (Kueue) or PodGroup.")
    name = serializers.CharField()
    reason = serializers.ChoiceField(choices=waiting.REASONS)
    explanation = serializers.CharField(help_text="The reason in words, in your language.")
    resource = serializers.CharField(help_text="The resource it waits for, where known.")
    queue = serializers.CharField(help_text="The Kueue ClusterQueue or Volcano queue, if any.")
    since = serializers.CharField(allow_null=True, help_text="When the cluster first saw it wait.")
    detail = serializers.CharField(help_text="The cluster's own message.")
    holders = HolderSerializer(many=True, help_text="For a used-up quota: who holds it.")


class NamespaceWaitsSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    namespace = serializers.CharField()
    team = serializers.CharField()
    taken_at = serializers.DateTimeField()
    error = serializers.CharField(help_text="Why the cluster could not be read (else empty).")
    waiting = WaitSerializer(many=True)


def waits_as_rows(entry: dict) -> list[dict]:
    return [{**w.as_dict(), "explanation": explanation(w)} for w in entry["waits"]]


class NamespaceWaiting(APIView):
    @extend_schema(
        summary="What waits in a namespace, and why",
        tags=["namespaces"],
        responses={200: NamespaceWaitsSerializer, **api_errors(403, 404)},
    )
    def get(self, request: Request, pk: int) -> Response:
        namespace = namespaces_visible_to(request.user).filter(pk=pk).first()
        if namespace is None:
            raise Http404(
                _("namespace #%(id)s does not exist or is not visible to you") % {"id": pk}
            )
        (entry,) = waits_of_namespaces([namespace])
        return Response(
            {
                "cluster": namespace.cluster.name,
                "namespace": namespace.name,
                "team": namespace.team.slug,
                "taken_at": entry["taken_at"],
                "error": entry["error"],
                "waiting": waits_as_rows(entry),
            }
        )
