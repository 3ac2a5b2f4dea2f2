"""How quota data looks in the API. Amounts are strings ("10", "0.5"), never floats."""

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from common.amounts import NOT_PLAIN_MESSAGE, format_amount, is_plain_amount
from quotas.models import Allocation, Cluster, Team, TeamNamespace


class AmountInputField(serializers.DecimalField):
    """An amount the API reads: a JSON number, or a string of plain ASCII decimals
    (``common.amounts.is_plain_amount``: not "3_0", other scripts' digits or exponents)."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or (isinstance(data, str) and not is_plain_amount(data)):
            raise serializers.ValidationError(NOT_PLAIN_MESSAGE % {"value": data}, code="invalid")
        return super().to_internal_value(data)


@extend_schema_field(
    {
        "type": "string",
        "nullable": True,
        "pattern": r"^-?[0-9]+(\.[0-9]+)?$",
        "example": "10",
        "description": 'An amount as text, without trailing zeros ("10", "0.5").',
    }
)
class AmountField(serializers.Field):
    """A resource amount as text without trailing zeros; read-only."""

    def __init__(self, **kwargs):
        kwargs.setdefault("read_only", True)
        super().__init__(**kwargs)

    def to_representation(self, value):
        return None if value is None else format_amount(value)


class TeamNamespaceSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name")

    class Meta:
        model = TeamNamespace
        fields = ["name", "cluster", "workload_class", "shadow"]


class TeamSerializer(serializers.ModelSerializer):
    parent = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    namespaces = TeamNamespaceSerializer(many=True, read_only=True)
    gpu_ceiling = AmountField(
        allow_null=True,
        help_text="Most GPUs the caps of the team and of the teams under it may add up to over "
        "all clusters (MIG slices by their share of a card; rule team_gpu_ceiling); null: "
        "none. /api/v1/budgets/ shows what it counts.",
    )

    class Meta:
        model = Team
        fields = [
            "slug",
            "name",
            "description",
            "parent",
            "contact_email",
            "gpu_ceiling",
            "namespaces",
        ]


class AllocationSerializer(serializers.ModelSerializer):
    namespace = serializers.CharField(source="team_namespace.name")
    cluster = serializers.CharField(source="team_namespace.cluster.name")
    team = serializers.CharField(source="team_namespace.team.slug")
    resource = serializers.CharField(source="resource.name")
    guarantee = AmountField()
    cap = AmountField()
    per_pod_max = AmountField()

    class Meta:
        model = Allocation
        fields = [
            "id",
            "namespace",
            "cluster",
            "team",
            "resource",
            "guarantee",
            "cap",
            "per_pod_max",
            "priority_classes",
            "version",
            "updated_at",
        ]


class CapacityLineSerializer(serializers.Serializer):
    resource = serializers.CharField()
    unit = serializers.CharField()
    capacity = AmountField()
    guaranteed = AmountField()
    capped = AmountField()
    free_guarantee = AmountField()
    overcommit_ratio = AmountField()
    over_promised = serializers.BooleanField()


class ClusterSerializer(serializers.ModelSerializer):
    backends = serializers.ListField(child=serializers.CharField(), read_only=True)
    max_cap_share = AmountField(source="effective_max_cap_share")
    top_priority_share = AmountField(
        source="effective_top_priority_share",
        allow_null=True,
        help_text="Largest share of each resource's capacity that namespaces allowed the "
        "highest priority class may be guaranteed (rule top_priority_share); null: no limit.",
    )
    resources = serializers.SerializerMethodField()
    backend_problems = serializers.SerializerMethodField()
    gpu_cards = serializers.DictField(
        child=serializers.IntegerField(),
        read_only=True,
        help_text='MIG-capable cards per model, e.g. {"A100 80GB": 4}: the MIG slices '
        "guaranteed on the cluster must be cut from them (rule mig_layout).",
    )

    gpu_hour_price = AmountField(
        allow_null=True,
        help_text="What one GPU-hour costs on the cluster, in `currency`; null: no price.",
    )
    currency = serializers.SerializerMethodField(
        help_text="ISO 4217 code of the price (the portal's QUOTA_CURRENCY)."
    )
    suggestion_prices = serializers.SerializerMethodField(
        help_text="What the monthly suggestions weigh per unit-hour (strings): `idle` "
        "(a guaranteed unit-hour nothing runs on), `borrowed` and `inference_borrowed` (demand "
        "above the guarantee within the cap), `blocked` (demand above the cap)."
    )

    class Meta:
        model = Cluster
        fields = [
            "name",
            "display_name",
            "environment",
            "sync_mode",
            "backends",
            "max_cap_share",
            "top_priority_share",
            "plan_generation",
            "resources",
            "backend_problems",
            "gpu_cards",
            "gpu_hour_price",
            "currency",
            "suggestion_prices",
        ]

    def get_currency(self, cluster: Cluster) -> str:
        return settings.QUOTA_CURRENCY

    @extend_schema_field(
        {
            "type": "object",
            "properties": {
                key: {"type": "string"}
                for key in ("idle", "borrowed", "inference_borrowed", "blocked")
            },
        }
    )
    def get_suggestion_prices(self, cluster: Cluster) -> dict[str, str]:
        return {
            "idle": format_amount(cluster.suggest_idle_price),
            "borrowed": format_amount(cluster.suggest_borrowed_price),
            "inference_borrowed": format_amount(cluster.suggest_inference_borrowed_price),
            "blocked": format_amount(cluster.suggest_blocked_price),
        }

    @extend_schema_field(
        {"type": "array", "items": {"type": "object", "additionalProperties": True}}
    )
    def get_backend_problems(self, cluster: Cluster) -> list[dict]:
        """Schedulers enabled for the cluster that its API server does not serve."""
        return self.context.get("backend_problems", {}).get(cluster.pk, [])

    @extend_schema_field(CapacityLineSerializer(many=True))
    def get_resources(self, cluster: Cluster) -> list[dict]:
        lines = self.context["capacity"].get(cluster.name, [])
        return CapacityLineSerializer(lines, many=True).data


class FindingSerializer(serializers.Serializer):
    level = serializers.CharField()
    rule = serializers.CharField()
    field = serializers.CharField()
    message = serializers.CharField()
    cluster = serializers.CharField()
    namespace = serializers.CharField()
    resource = serializers.CharField()
