"""Audit events written the way the services write them."""

from django.contrib.auth.models import User

from quotas.audit.chain import (
    audit_record,
)
from quotas.models.audit import AuditEvent


def append_events(n: int, *, user: User | None, target: object) -> list[AuditEvent]:
    return [
        audit_record(
            acting_user=user,
            action="allocation.set",
            target=target,
            before={"cap": i},
            after={"cap": i + 1},
            comment=f"change {i}",
        )
        for i in range(n)
    ]
