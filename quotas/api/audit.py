"""``GET audit-events/?actor=&action=&target_type=&target_id=&since=&until=`` (admins and
auditors): the append-only audit log, newest first, with each event's place in the hash chain
(``seq``, ``prev_hash``, ``hash``) and its keyed MAC (``mac``, ``mac_key_id``), so a client can
check the chain (``verify_audit_chain`` does it with the key)."""

from rest_framework import generics, serializers

from portal.api.pagination import ApiPagination
from quotas.api.filters import moment_param, param, period_check
from quotas.api.views import _require_overview
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


class AuditEventList(generics.ListAPIView):
    """``actor`` is a user name, ``action`` an exact action or a prefix ending in a dot
    (``request.``), ``since`` / ``until`` ISO 8601 times or days (until: the whole day)."""

    serializer_class = AuditEventSerializer
    pagination_class = ApiPagination

    def get_queryset(self):
        _require_overview(self.request.user)
        params = self.request.query_params
        events = AuditEvent.objects.order_by("-seq")
        if actor := param(params, "actor"):
            events = events.filter(actor_username=actor)
        if action := param(params, "action"):
            events = (
                events.filter(action__startswith=action)
                if action.endswith(".")
                else events.filter(action=action)
            )
        if target_type := param(params, "target_type"):
            events = events.filter(target_type=target_type)
        if target_id := param(params, "target_id"):
            events = events.filter(target_id=target_id)
        since = moment_param(params, "since")
        until = moment_param(params, "until", end_of_day=True)
        period_check(since, until, start_key="since", end_key="until")
        if since is not None:
            events = events.filter(created_at__gte=since)
        if until is not None:
            events = events.filter(created_at__lte=until)
        return events
