"""``GET audit-events/?actor=&action=&target_type=&target_id=&since=&until=`` (admins and
auditors): the append-only audit log, newest first, with each event's place in the hash chain
(``seq``, ``prev_hash``, ``hash``) and its keyed MAC (``mac``, ``mac_key_id``), so a client can
check the chain (``verify_audit_chain`` does it with the key)."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import generics, serializers

from common.api.pagination import ApiPagination
from common.api.schema import api_errors
from quotas.api.views import OverviewOnly
from quotas.filtersets import AuditEventFilterSet
from quotas.models import AuditEvent


class AuditEventSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_username", allow_blank=True)

    class Meta:
        model = AuditEvent
        fields = [
            "seq",
            "created_at",
            "actor",
            "action",
            "target_type",
            "target_id",
            "target_repr",
            "before",
            "after",
            "comment",
            "prev_hash",
            "hash",
            "mac",
            "mac_key_id",
        ]


@extend_schema_view(
    get=extend_schema(
        summary="List audit events, newest first",
        tags=["audit"],
        responses={200: AuditEventSerializer(many=True), **api_errors(403)},
    )
)
class AuditEventList(OverviewOnly, generics.ListAPIView):
    """``actor`` is a user name, ``action`` an exact action or a prefix ending in a dot
    (``request.``), ``since`` / ``until`` ISO 8601 times or days (until: the whole day)."""

    serializer_class = AuditEventSerializer
    pagination_class = ApiPagination
    filterset_class = AuditEventFilterSet
    queryset = AuditEvent.objects.none()

    def get_queryset(self):
        return AuditEvent.objects.order_by("-seq")
