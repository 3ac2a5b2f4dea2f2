"""GET /api/v1/budgets/: each team's GPUs over every cluster, its ceiling and their cost per
month, scoped as the cross-cluster summary is (other teams together for a lead or member)."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.budgets import BudgetRow, team_budgets
from common.api.schema import api_errors
from quotas.api.serializers import AmountField

_MONEY = {"max_digits": 18, "decimal_places": 2, "read_only": True, "allow_null": True}


class BudgetRowSerializer(serializers.Serializer):
    team = serializers.SerializerMethodField(
        help_text="The team's slug; null for the other teams together and for the total."
    )
    gpus_guaranteed = AmountField(
        source="guaranteed",
        help_text="GPUs guaranteed over every cluster: whole GPUs, MIG slices by their share "
        "of a card.",
    )
    gpus_capped = AmountField(source="capped", help_text="GPUs at the caps, counted alike.")
    gpu_ceiling = AmountField(
        source="ceiling", allow_null=True, help_text="The team's ceiling; null: none."
    )
    ceiling_counts = AmountField(
        source="counted_figure",
        allow_null=True,
        help_text="What the ceiling counts: the caps of the team and of the teams under it, "
        "plus what approved temporary grants will add (rule team_gpu_ceiling).",
    )
    ceiling_with_teams_under = serializers.BooleanField(source="with_teams_under")
    over_ceiling = serializers.BooleanField()
    guaranteed_per_month = serializers.DecimalField(
        **_MONEY,
        help_text="Cost of the guaranteed GPUs per month (730 hours) at the clusters' GPU-hour "
        "prices; null when none of the GPUs is on a cluster with a price.",
    )
    capped_per_month = serializers.DecimalField(
        **_MONEY, help_text="Cost per month with every cap in use; null without prices."
    )
    gpus_unpriced = AmountField(
        source="unpriced",
        allow_null=True,
        help_text="Capped GPUs on clusters without a price (not in the costs); null: none.",
    )

    def get_team(self, row: BudgetRow) -> str | None:
        return row.team.slug if row.team else None


class BudgetsSerializer(serializers.Serializer):
    currency = serializers.CharField(help_text="ISO 4217 code of the costs (QUOTA_CURRENCY).")
    hours_per_month = serializers.IntegerField()
    teams = BudgetRowSerializer(many=True, source="rows")
    others = BudgetRowSerializer(
        allow_null=True, help_text="The teams you may not see, together; null for admins."
    )
    total = BudgetRowSerializer()


class Budgets(APIView):
    """Anyone signed in: your teams by name (admins and auditors: every team), the others in
    one row, and the total; the same figures as the cross-cluster summary page."""

    @extend_schema(
        summary="Read each team's GPUs over all clusters, ceiling and cost",
        tags=["teams"],
        responses={200: BudgetsSerializer, **api_errors(401)},
    )
    def get(self, request: Request) -> Response:
        budgets = team_budgets(user=request.user, others_label="", total_label="")
        return Response(BudgetsSerializer(budgets).data)
