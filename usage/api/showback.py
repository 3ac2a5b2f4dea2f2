"""GET /api/v1/showback/ (?start=YYYY-MM&end=YYYY-MM&cluster=&team=): per team and month the
GPU-hours used, guaranteed, borrowed and idle, and their cost; the showback page's rows."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.api.schema import api_errors
from quotas.api.serializers import AmountField
from usage.api.suggestions import MonthField
from usage.showback import showback, showback_period

_MONEY = {"max_digits": 18, "decimal_places": 2, "read_only": True, "allow_null": True}


class ShowbackRowSerializer(serializers.Serializer):
    month = MonthField()
    scope = serializers.ChoiceField(
        choices=["team", "others", "total"],
        help_text="team: one of your teams (admins and auditors: any); others: the teams you "
        "may not see, together; total: every team.",
    )
    team = serializers.CharField(allow_null=True, help_text="The team's slug (scope team).")
    gpu_hours_used = AmountField(
        source="used", help_text="GPU-hours allocated to pods (a MIG slice: its share of a card)."
    )
    gpu_hours_guaranteed = AmountField(
        source="guaranteed", help_text="GPU-hours the guarantees held over the same time."
    )
    gpu_hours_borrowed = AmountField(
        source="borrowed", help_text="GPU-hours used above the guarantee."
    )
    gpu_hours_idle = AmountField(source="idle", help_text="GPU-hours of the guarantee left unused.")
    idle_percent = serializers.IntegerField(
        allow_null=True, help_text="Idle hours as a share of the guaranteed ones."
    )
    gpu_hours_unpriced = AmountField(
        source="unpriced", help_text="GPU-hours used on clusters without a price."
    )
    cost_used = serializers.DecimalField(
        source="used_cost",
        **_MONEY,
        help_text="GPU-hours used times each cluster's GPU-hour price; null without prices.",
    )
    cost_guaranteed = serializers.DecimalField(
        source="guaranteed_cost", **_MONEY, help_text="The guaranteed GPU-hours' cost."
    )
    cost_idle = serializers.DecimalField(
        source="idle_cost", **_MONEY, help_text="The cost of the guarantee left idle."
    )


class ShowbackSerializer(serializers.Serializer):
    currency = serializers.CharField(help_text="ISO 4217 code of the costs (QUOTA_CURRENCY).")
    start = MonthField(source="period.start")
    end = MonthField(source="period.end")
    cluster = serializers.CharField(
        source="period.cluster.name", allow_null=True, default=None, help_text="null: all."
    )
    rows = ShowbackRowSerializer(
        many=True, help_text="Per month: each team, then the other teams, then the total."
    )


def _month(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(name, str, description=description, pattern=r"^[0-9]{4}-[0-9]{2}$")


class Showback(APIView):
    """Anyone signed in: your teams by name (admins and auditors: every team), the others in
    one row, and the total per month; the same figures as the showback page."""

    @extend_schema(
        summary="Read GPU-hours used, guaranteed, borrowed and idle per team and month",
        tags=["usage"],
        parameters=[
            _month("start", "First month, YYYY-MM (default: five months before this one)."),
            _month("end", "Last month, YYYY-MM (default: this one); at most 24 months."),
            OpenApiParameter("cluster", str, description="Cluster name (default: all)."),
            OpenApiParameter("team", str, description="Team slug (a team you may see)."),
        ],
        responses={200: ShowbackSerializer, **api_errors(400, 401)},
    )
    def get(self, request: Request) -> Response:
        period = showback_period(request.user, request.query_params)
        return Response(ShowbackSerializer(showback(user=request.user, period=period)).data)
