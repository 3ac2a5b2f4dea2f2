"""The request lifecycle: one allowed-transition table and one function that moves a request.

Every move locks the row, checks the table, saves and writes the audit event in one atomic block.
"""

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from approvals.models import QuotaRequest
from common.errors import NotAllowed
from quotas.audit.chain import audit_record

S = QuotaRequest.Status

ALLOWED: dict[str, frozenset[str]] = {
    S.DRAFT: frozenset({S.SUBMITTED, S.WITHDRAWN}),
    S.SUBMITTED: frozenset({S.APPROVED, S.REJECTED, S.CHANGES_REQUESTED, S.WITHDRAWN}),
    S.CHANGES_REQUESTED: frozenset({S.SUBMITTED, S.WITHDRAWN}),
    # An approved request stays approved only while it is a temporary grant waiting for its
    # start: until then its requester may withdraw it and an admin may revoke it. A grant
    # that no longer holds at its start fails without applying anything. An approved
    # extension of a grant is applied at once: it moves the grant's end, no allocation.
    S.APPROVED: frozenset({S.APPLYING, S.APPLIED, S.FAILED, S.WITHDRAWN, S.REVOKED}),
    S.APPLYING: frozenset({S.APPLIED, S.ACTIVE, S.FAILED}),
    S.FAILED: frozenset({S.APPLIED, S.ACTIVE, S.APPLYING}),
    S.ACTIVE: frozenset({S.EXPIRED}),
    S.APPLIED: frozenset(),
    S.REJECTED: frozenset(),
    S.WITHDRAWN: frozenset(),
    S.REVOKED: frozenset(),
    S.EXPIRED: frozenset(),
}


def allowed_from(target: str) -> list[str]:
    return sorted(source for source, targets in ALLOWED.items() if target in targets)


def transition_refusal(request: QuotaRequest, target: str) -> NotAllowed | None:
    """The refusal of moving the request to ``target`` from its status (None: allowed)."""
    if target in ALLOWED.get(request.status, frozenset()):
        return None
    sources = ", ".join(str(S(s).label) for s in allowed_from(target)) or _("nowhere")
    return NotAllowed(
        _("request #%(id)s is %(status)s; it cannot become %(target)s (only from: %(sources)s)")
        % {
            "id": request.pk,
            "status": S(request.status).label,
            "target": S(target).label,
            "sources": sources,
        },
        field="status",
        extra={"status": request.status, "target": target},
    )


def check_transition(request: QuotaRequest, target: str) -> None:
    refusal = transition_refusal(request, target)
    if refusal is not None:
        raise refusal


def transition(
    request: QuotaRequest,
    target: str,
    *,
    acting_user: User | None,
    comment: str = "",
    extra: dict | None = None,
) -> QuotaRequest:
    """Move a locked request to `target` and audit it; call inside transaction.atomic()."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("transition() must run inside transaction.atomic()")
    check_transition(request, target)
    before = request.status
    request.status = target
    now = timezone.now()
    fields = ["status", "updated_at"]
    if target == S.SUBMITTED:
        request.submitted_at = now
        fields.append("submitted_at")
    if target in (S.APPROVED, S.REJECTED, S.CHANGES_REQUESTED, S.REVOKED):
        request.decided_at, request.decided_by = now, acting_user
        request.decision_comment = comment
        fields += ["decided_at", "decided_by", "decision_comment"]
    request.save(update_fields=fields)
    audit_record(
        acting_user=acting_user,
        action=f"request.{target}",
        target=request,
        before={"status": before},
        after={"status": target, **(extra or {})},
        comment=comment,
    )
    return request
