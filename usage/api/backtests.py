"""GET /api/v1/suggestions/backtest/ (?cluster=&resource=&month=YYYY-MM&policy=): how the
suggestions did, per cluster, resource, month and policy; the rows of the suggestions page's
"How suggestions did" panels, through the same selector."""

from decimal import Decimal

from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import generics, serializers

from common.amounts import format_amount
from common.api.pagination import ApiPagination
from quotas.api.serializers import AmountField
from usage.api.suggestions import MonthField
from usage.filtersets import SuggestionBacktestFilterSet
from usage.models import SuggestionBacktest
from usage.suggestion_selectors import backtests_list

TENTH = Decimal("0.1")


@extend_schema_field(
    {
        "type": "string",
        "nullable": True,
        "pattern": r"^[0-9]+(\.[0-9])?$",
        "example": "93.5",
        "description": "A percent with at most one decimal, as text; null when nothing to divide.",
    }
)
class PercentField(serializers.Field):
    """A share as a percent with one decimal, as text; null when there is nothing to divide."""

    def __init__(self, **kwargs):
        kwargs.setdefault("read_only", True)
        super().__init__(**kwargs)

    def to_representation(self, value):
        if value is None:
            return None
        return format_amount(Decimal(str(value * 100)).quantize(TENTH))


class PricesSerializer(serializers.Serializer):
    idle = serializers.CharField(help_text="An idle guaranteed unit-hour.")
    borrowed = serializers.CharField(help_text="A borrowed unit-hour (training, dev).")
    inference_borrowed = serializers.CharField(help_text="A borrowed inference unit-hour.")
    blocked = serializers.CharField(help_text="A unit-hour blocked by the cap.")


class SuggestionBacktestSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name")
    resource = serializers.CharField(source="resource.name")
    month = MonthField(help_text="The month scored; the plans come from the month before.")
    policy = serializers.ChoiceField(
        choices=SuggestionBacktest.Policy.choices,
        help_text="suggested: the portal's suggestions; equal_split: capacity / namespaces each; "
        "seed_rule: guarantee 80% of the typical daily peak, cap the highest; hindsight: the "
        "least cost on the month itself, under the same rules.",
    )
    namespaces = serializers.IntegerField(help_text="Namespaces with demand that month.")
    demand = AmountField(help_text="Unit-hours of demand (allocated + pending at each sample).")
    covered = AmountField(help_text="Unit-hours of demand within the guarantees.")
    covered_percent = PercentField(
        source="covered_share", allow_null=True, help_text="Covered, as a share of demand."
    )
    borrowed = AmountField(help_text="Unit-hours of demand above the guarantees, within caps.")
    blocked = AmountField(help_text="Unit-hours of demand above the caps.")
    blocked_percent = PercentField(
        source="blocked_share", allow_null=True, help_text="Blocked, as a share of demand."
    )
    idle = AmountField(help_text="Guaranteed unit-hours nothing ran on.")
    guaranteed = AmountField(help_text="Guaranteed unit-hours (guarantee × hours sampled).")
    idle_percent = PercentField(
        source="idle_share", allow_null=True, help_text="Idle, as a share of guaranteed."
    )
    cost = AmountField(
        help_text="Idle, borrowed and blocked unit-hours priced as the suggestions price them "
        "(`prices`); lower is better. Relative, not money."
    )
    prices = PricesSerializer(help_text="The cluster's prices the cost is under.")

    class Meta:
        model = SuggestionBacktest
        fields = [
            "cluster",
            "resource",
            "month",
            "policy",
            "namespaces",
            "demand",
            "covered",
            "covered_percent",
            "borrowed",
            "blocked",
            "blocked_percent",
            "idle",
            "guaranteed",
            "idle_percent",
            "cost",
            "prices",
            "computed_at",
        ]


@extend_schema_view(
    get=extend_schema(summary="List how the suggestions did (backtest)", tags=["suggestions"])
)
class SuggestionBacktestList(generics.ListAPIView):
    """Per cluster, resource and month: the suggestions made from the month before, an equal
    split, the seed's rule and the best plan in hindsight, scored on the month's demand. The
    clusters whose suggestions you may see (a namespace of your teams on it; admins and
    auditors: all), newest month first."""

    serializer_class = SuggestionBacktestSerializer
    pagination_class = ApiPagination
    filterset_class = SuggestionBacktestFilterSet
    queryset = SuggestionBacktest.objects.none()

    def get_queryset(self):
        return backtests_list(self.request.user)
