"""Deciding several requests at once from the admins' queue: each one through the service a
single decision takes (request_approve, request_reject), with its rules, plan check, policy,
two-admin rule, locks and audit, in a transaction of its own. One request refused does not
stop the others; the answer says, per request, what became of it.

Each decision commits (or rolls back) before the next one starts, so two admins deciding
overlapping sets hold at most one request's locks at a time: they meet on a request as two
single decisions do (one approves, the other is refused or adds the second approval), and
never wait on each other in a circle. The ids are taken in ascending order.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from approvals.access import require_platform_admin
from approvals.lifecycle import request_approve, request_reject
from approvals.models import COMMENT_MAX_LENGTH, QuotaRequest
from common.errors import ApplicationError, ValidationFailed

S = QuotaRequest.Status
# The most requests one action decides (a queue page holds 25).
MAX_BULK = 100
BULK_ACTIONS = ("approve", "reject")


@dataclass(frozen=True)
class BulkOutcome:
    """What became of one request: ``approved`` (the last approval needed: it applies),
    ``waiting`` (approved by this admin, another one must approve too), ``rejected``, or
    ``refused`` (nothing changed; ``message`` says why)."""

    request_id: int
    outcome: str
    message: str
    status: str = ""


def _outcome(request: QuotaRequest, action: str) -> BulkOutcome:
    status = request.get_status_display()
    if action == "reject":
        return BulkOutcome(request.pk, "rejected", _("rejected"), request.status)
    if request.status == S.SUBMITTED:
        given = request.approvals.count()
        return BulkOutcome(
            request.pk,
            "waiting",
            ngettext(
                "approved by you; %(given)s of %(needed)s approval given, another platform "
                "admin must approve",
                "approved by you; %(given)s of %(needed)s approvals given, another platform "
                "admin must approve",
                request.approvals_needed,
            )
            % {"given": given, "needed": request.approvals_needed},
            request.status,
        )
    return BulkOutcome(
        request.pk, "approved", _("approved (%(status)s)") % {"status": status}, request.status
    )


def requests_decide_many(
    *, request_ids: Iterable[int], acting_user: User, action: str, comment: str = ""
) -> list[BulkOutcome]:
    """Approve (or reject, with the comment as the reason) each request, one at a time."""
    require_platform_admin(acting_user)
    if action not in BULK_ACTIONS:
        raise ValidationFailed(
            _("action: must be approve or reject, got %(action)s") % {"action": repr(action)},
            field="action",
        )
    ids = sorted(set(request_ids))
    if not ids:
        raise ValidationFailed(_("ids: select at least one request"), field="ids")
    if len(ids) > MAX_BULK:
        raise ValidationFailed(
            _("ids: at most %(max)s requests at once, got %(n)s")
            % {"max": MAX_BULK, "n": len(ids)},
            field="ids",
        )
    if "\x00" in comment or len(comment) > COMMENT_MAX_LENGTH:
        raise ValidationFailed(
            _("comment: at most %(max)s characters, and no NUL characters")
            % {"max": COMMENT_MAX_LENGTH},
            field="comment",
        )
    if action == "reject" and not comment.strip():
        raise ValidationFailed(_("say why the requests are rejected (comment)"), field="comment")
    found = QuotaRequest.objects.select_related("team", "requested_by").in_bulk(ids)
    outcomes = []
    for pk in ids:
        request = found.get(pk)
        if request is None:
            outcomes.append(
                BulkOutcome(pk, "refused", _("request #%(id)s does not exist") % {"id": pk})
            )
            continue
        try:
            if action == "approve":
                decided = request_approve(request=request, acting_user=acting_user, comment=comment)
            else:
                decided = request_reject(request=request, acting_user=acting_user, comment=comment)
        except ApplicationError as exc:
            request.refresh_from_db(fields=["status"])
            outcomes.append(BulkOutcome(pk, "refused", exc.message, request.status))
            continue
        outcomes.append(_outcome(decided, action))
    return outcomes
