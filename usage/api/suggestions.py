"""API of suggestions and usage: ``GET suggestions/`` (?cluster=&team=&month=),
``GET suggestions/<id>/`` and ``GET usage/canary/`` (?cluster=&team=&start=&end=), through the
same selectors and filters as the pages."""

from django.http import Http404
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.amounts import format_amount
from common.api.pagination import ApiPagination
from common.dates import parse_day
from common.errors import ValidationFailed
from quotas.api.serializers import AmountField
from quotas.models import Cluster
from quotas.selectors import teams_visible_to
from usage.canary import canary_metrics
from usage.filtersets import SuggestionFilterSet
from usage.models import Suggestion
from usage.suggestion_selectors import suggestions_list, suggestions_visible_to


@extend_schema_field({"type": "string", "pattern": r"^[0-9]{4}-[0-9]{2}$", "example": "2025-06"})
class MonthField(serializers.DateField):
    """A month as YYYY-MM."""

    def __init__(self, **kwargs):
        super().__init__(format="%Y-%m", **kwargs)


class GuaranteeCapSerializer(serializers.Serializer):
    guarantee = AmountField()
    cap = AmountField()


class SuggestionSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name")
    team = serializers.CharField(source="team_namespace.team.slug")
    namespace = serializers.CharField(source="team_namespace.name")
    resource = serializers.CharField(source="resource.name")
    month = MonthField()
    current = serializers.SerializerMethodField()
    suggested = serializers.SerializerMethodField()
    notes = serializers.ListField(
        source="localized_notes",
        child=serializers.CharField(),
        read_only=True,
        help_text="Why, in the request's language (Accept-Language).",
    )
    figures = serializers.DictField(
        source="localized_figures",
        read_only=True,
        help_text="The figures behind the suggestion; amounts as strings, `basis` (how the "
        "values were found) in the request's language.",
    )

    class Meta:
        model = Suggestion
        fields = [
            "id",
            "cluster",
            "team",
            "namespace",
            "resource",
            "month",
            "current",
            "suggested",
            "confidence",
            "flags",
            "notes",
            "figures",
            "computed_at",
        ]

    @extend_schema_field(GuaranteeCapSerializer)
    def get_current(self, obj) -> dict:
        return {
            "guarantee": format_amount(obj.current_guarantee),
            "cap": format_amount(obj.current_cap),
        }

    @extend_schema_field(GuaranteeCapSerializer)
    def get_suggested(self, obj) -> dict:
        return {
            "guarantee": format_amount(obj.suggested_guarantee),
            "cap": format_amount(obj.suggested_cap),
        }


@extend_schema_view(get=extend_schema(summary="List suggestions", tags=["suggestions"]))
class SuggestionList(generics.ListAPIView):
    """Suggested guarantee and cap per namespace and month, with the figures behind them."""

    serializer_class = SuggestionSerializer
    pagination_class = ApiPagination
    filterset_class = SuggestionFilterSet
    queryset = Suggestion.objects.none()

    def get_queryset(self):
        return suggestions_list(self.request.user)


@extend_schema_view(get=extend_schema(summary="Read a suggestion", tags=["suggestions"]))
class SuggestionDetail(generics.RetrieveAPIView):
    serializer_class = SuggestionSerializer
    queryset = Suggestion.objects.none()

    def get_object(self):
        suggestion = suggestions_visible_to(self.request.user).filter(pk=self.kwargs["pk"]).first()
        if suggestion is None:
            raise Http404(_("no such suggestion"))
        return suggestion


def _day(params, key: str):
    return parse_day((params.get(key) or "").strip(), field=key)


class CanaryTeamSerializer(serializers.Serializer):
    team = serializers.CharField(allow_null=True, help_text="Team slug; null: the total.")
    days = serializers.IntegerField()
    gpu_utilization_mean = AmountField()
    queue_wait_mean_seconds = serializers.IntegerField(allow_null=True)
    queue_wait_max_seconds = serializers.IntegerField(allow_null=True)
    evicted_pods = serializers.IntegerField()
    gpu_hours = AmountField()
    borrowed_gpu_hours = AmountField()
    borrowing_ratio = AmountField()
    idle_guaranteed_gpu_hours = AmountField()


class CanarySerializer(serializers.Serializer):
    cluster = serializers.CharField()
    start = serializers.DateField()
    end = serializers.DateField()
    teams = CanaryTeamSerializer(many=True)


def _day_parameter(name: str, what: str) -> OpenApiParameter:
    return OpenApiParameter(name, OpenApiTypes.DATE, required=True, description=what)


class CanaryMetrics(APIView):
    """The seed's canary metrics per team of one cluster over [start, end], and the total."""

    @extend_schema(
        summary="Canary metrics of a cluster over a period",
        tags=["usage"],
        parameters=[
            OpenApiParameter("cluster", str, required=True, description="Cluster name."),
            OpenApiParameter("team", str, description="Team slug (a team you may see)."),
            _day_parameter("start", "First day, YYYY-MM-DD."),
            _day_parameter("end", "Last day, YYYY-MM-DD."),
        ],
        responses=CanarySerializer,
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        name = (params.get("cluster") or "").strip()
        if not name:
            raise ValidationFailed(_("cluster: required (a cluster name)"), field="cluster")
        cluster = Cluster.objects.filter(name=name).first()
        if cluster is None:
            raise ValidationFailed(
                _("cluster: no cluster named %(name)s") % {"name": repr(name)}, field="cluster"
            )
        team = None
        if slug := (params.get("team") or "").strip():
            team = teams_visible_to(request.user).filter(slug=slug).first()
            if team is None:
                raise ValidationFailed(
                    _("team: no team %(team)s among the teams you may see") % {"team": repr(slug)},
                    field="team",
                )
        start, end = _day(params, "start"), _day(params, "end")
        rows = canary_metrics(user=request.user, cluster=cluster, team=team, start=start, end=end)
        amount = AmountField().to_representation
        return Response(
            {
                "cluster": cluster.name,
                "start": start.isoformat(),
                "end": end.isoformat(),
                "teams": [
                    {
                        "team": r.team or None,
                        "days": r.days,
                        "gpu_utilization_mean": amount(r.utilization_mean),
                        "queue_wait_mean_seconds": r.queue_wait_mean_seconds,
                        "queue_wait_max_seconds": r.queue_wait_max_seconds,
                        "evicted_pods": r.evictions,
                        "gpu_hours": amount(r.gpu_hours),
                        "borrowed_gpu_hours": amount(r.borrowed_gpu_hours),
                        "borrowing_ratio": amount(r.borrowing_ratio),
                        "idle_guaranteed_gpu_hours": amount(r.idle_guaranteed_gpu_hours),
                    }
                    for r in rows
                ],
            }
        )
